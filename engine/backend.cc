#include "engine/backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/random_fill.h"

namespace arbiter {

std::string DeviceInfo::Fingerprint() const {
  // Everything that can change a measurement; the UUID is left out on purpose so
  // identical devices share verdicts (one daemon per GPU, same model and stack).
  std::string out = absl::StrCat(backend, "|", name, "|", arch, "|cc", compute_capability, "|mp",
                                 multiprocessors);
  for (const auto& [library, version] : versions) absl::StrAppend(&out, "|", library, "=", version);
  return out;
}

const char* RegionKindName(RegionKind kind) {
  switch (kind) {
    case RegionKind::kHostMemfd: return "host_memfd";
    case RegionKind::kCudaVmmFd: return "cuda_vmm_fd";
    case RegionKind::kCudaIpc: return "cuda_ipc";
  }
  return "unknown";
}

size_t TotalBytes(absl::Span<const HostPiece> pieces) {
  size_t total = 0;
  for (const HostPiece& piece : pieces) total += piece.bytes;
  return total;
}

absl::Status Stream::GatherToDevice(Buffer& dst, absl::Span<const HostPiece> pieces) {
  const size_t total = TotalBytes(pieces);
  if (total > dst.bytes()) {
    return absl::InternalError(absl::StrCat("gather to device: ", total, " bytes into a buffer of ",
                                            dst.bytes()));
  }
  char* to = static_cast<char*>(dst.data());
  for (const HostPiece& piece : pieces) {
    if (piece.bytes == 0) continue;
    BufferView window(to, piece.bytes);
    RETURN_IF_ERROR(CopyToDevice(window, piece.data, piece.bytes));
    to += piece.bytes;
  }
  return absl::OkStatus();
}

absl::Status Stream::ReferenceRows(const Problem& p, const Buffer& a, const Buffer& b,
                                   const std::vector<int64_t>& rows, std::vector<double>* c) {
  std::vector<double> full;
  RETURN_IF_ERROR(Reference(p, a, b, &full));
  c->resize(rows.size() * static_cast<size_t>(p.n));
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy_n(full.data() + rows[r] * p.n, p.n, c->data() + r * p.n);
  }
  return absl::OkStatus();
}

absl::Status Stream::CopyRowsToHost(void* dst, const Buffer& src, size_t row_bytes,
                                    const std::vector<int64_t>& rows) {
  if (rows.empty()) return absl::OkStatus();
  const int64_t last = *std::max_element(rows.begin(), rows.end());
  std::vector<uint8_t> host(static_cast<size_t>(last + 1) * row_bytes);
  RETURN_IF_ERROR(CopyToHost(host.data(), src, host.size()));
  for (size_t r = 0; r < rows.size(); ++r) {
    std::memcpy(static_cast<uint8_t*>(dst) + r * row_bytes, host.data() + rows[r] * row_bytes,
                row_bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Stream::CountNonFinite(const Buffer& buf, DType dtype, size_t count) {
  std::vector<uint8_t> host(count * ElementSize(dtype));
  RETURN_IF_ERROR(CopyToHost(host.data(), buf, host.size()));
  int64_t nonfinite = 0;
  for (size_t i = 0; i < count; ++i) nonfinite += !std::isfinite(LoadAsDouble(dtype, host.data(), i));
  return nonfinite;
}

absl::StatusOr<int64_t> Stream::CountDifferences(const Buffer& x, const Buffer& y, DType dtype,
                                                 size_t count) {
  const size_t elem = ElementSize(dtype);
  std::vector<uint8_t> hx(count * elem), hy(count * elem);
  RETURN_IF_ERROR(CopyToHost(hx.data(), x, hx.size()));
  RETURN_IF_ERROR(CopyToHost(hy.data(), y, hy.size()));
  int64_t differ = 0;
  for (size_t i = 0; i < count; ++i) {
    differ += std::memcmp(hx.data() + i * elem, hy.data() + i * elem, elem) != 0;
  }
  return differ;
}

absl::Status Stream::FillRandom(Buffer& buf, DType dtype, size_t count, uint64_t seed) {
  // Left uninitialized: the fill writes every byte (zeroing first costs as much again).
  const size_t bytes = count * ElementSize(dtype);
  std::unique_ptr<uint8_t[]> host(new uint8_t[bytes]);
  ::arbiter::FillRandom(dtype, host.get(), count, seed);
  return CopyToDevice(buf, host.get(), bytes);
}

}  // namespace arbiter
