#include "engine/host_gather.h"

#include <algorithm>
#include <cstring>

namespace arbiter {

HostGather::HostGather(absl::Span<const HostPiece> pieces) : pieces_(pieces) {
  ends_.reserve(pieces.size());
  size_t end = 0;
  for (const HostPiece& piece : pieces) ends_.push_back(end += piece.bytes);
}

void HostGather::Copy(size_t offset, size_t n, void* dst, ForkJoinPool* pool) const {
  char* to = static_cast<char*>(dst);
  const int parts = pool == nullptr ? 1
                                    : static_cast<int>(std::clamp<size_t>(
                                          n / kMinPartBytes, 1, static_cast<size_t>(pool->threads())));
  if (parts == 1) {
    CopySerial(offset, n, to);
    return;
  }
  // Parts of whole cache lines, the last taking the rest: no two parts write one line.
  const size_t share = (n / static_cast<size_t>(parts)) & ~size_t{63};
  pool->Run(parts, [&](int part) {
    const size_t begin = static_cast<size_t>(part) * share;
    const size_t end = part == parts - 1 ? n : begin + share;
    CopySerial(offset + begin, end - begin, to + begin);
  });
}

void HostGather::CopySerial(size_t offset, size_t n, char* dst) const {
  // The first piece that ends past `offset` holds its first byte (empty pieces end where the one before does).
  size_t i = static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), offset) - ends_.begin());
  size_t within = offset - (i == 0 ? 0 : ends_[i - 1]);
  while (n > 0) {
    const size_t take = std::min(n, pieces_[i].bytes - within);
    std::memcpy(dst, static_cast<const char*>(pieces_[i].data) + within, take);
    dst += take;
    n -= take;
    within = 0;
    ++i;
  }
}

}  // namespace arbiter
