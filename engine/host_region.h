// Client host memory mapped for a region (RegionKind::kHostMemfd): a memfd the
// client passed over the fd socket, mapped shared. The CPU backend's kernels
// read and write it in place; the CUDA backend page-locks it and copies it over
// the bus (backends/cuda/cuda_regions.h), with no socket in between.
//
// The memfd must be sealed against shrinking (F_SEAL_SHRINK): otherwise the
// client could truncate it under a running kernel and the daemon would take a
// SIGBUS. Its size must cover the registered bytes.
//
// Not thread-safe: one owner, like every Buffer (the RegionTable).
#pragma once

#include <cstddef>
#include <memory>

#include "engine/backend.h"

namespace arbiter {

class HostRegion final : public Buffer {
 public:
  // FAILED_PRECONDITION naming what was expected when `fd` is not a memfd
  // sealed with F_SEAL_SHRINK, is smaller than `bytes`, or cannot be mapped
  // read-write. The mapping keeps no reference to `fd`.
  static absl::StatusOr<std::unique_ptr<HostRegion>> Map(int fd, size_t bytes);
  ~HostRegion() override;
  HostRegion(const HostRegion&) = delete;
  HostRegion& operator=(const HostRegion&) = delete;

  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  HostRegion(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  void* data_;
  size_t bytes_;
};

}  // namespace arbiter
