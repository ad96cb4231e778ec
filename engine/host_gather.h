// Bytes that arrived in pieces (a gRPC message's slices), read as one run:
// any range of their concatenation copied to contiguous memory, split over a
// ForkJoinPool's threads. A single thread's memcpy moves ~5 GB/s from memory
// just written by the kernel's socket reads into pinned staging (the H200
// host's h2d stage, 16 MiB in 3 ms); the copy is bound by one core's
// outstanding misses, not by memory bandwidth, so parts on other cores add up.
//
// Holds a view of the pieces (they must outlive it) and their running ends.
// Thread-compatible: const methods may run concurrently.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "engine/backend.h"
#include "base/fork_join_pool.h"

namespace arbiter {

class HostGather {
 public:
  // Below this, a part's wake-up costs more than its share of the copy saves.
  static constexpr size_t kMinPartBytes = 512 << 10;

  explicit HostGather(absl::Span<const HostPiece> pieces);

  size_t bytes() const { return ends_.empty() ? 0 : ends_.back(); }
  // Copies bytes [offset, offset + n) of the pieces' concatenation to `dst`
  // (offset + n <= bytes()), in parts of at least kMinPartBytes over `pool`'s
  // threads (all on the caller when `pool` is null).
  void Copy(size_t offset, size_t n, void* dst, ForkJoinPool* pool) const;

 private:
  void CopySerial(size_t offset, size_t n, char* dst) const;

  absl::Span<const HostPiece> pieces_;
  std::vector<size_t> ends_;  // ends_[i]: the bytes of pieces 0..i together
};

}  // namespace arbiter
