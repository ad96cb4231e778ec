#include "backends/cpu/host_buffer.h"

#include <cstdlib>
#include <string>

namespace arbiter::cpu {

absl::StatusOr<std::unique_ptr<HostBuffer>> HostBuffer::Create(size_t bytes) {
  // aligned_alloc wants a size that is a multiple of the alignment, and > 0.
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (data == nullptr) {
    return absl::ResourceExhaustedError("cpu: cannot allocate " + std::to_string(bytes) +
                                        " bytes of host memory");
  }
  return std::unique_ptr<HostBuffer>(new HostBuffer(data, bytes));
}

HostBuffer::~HostBuffer() { std::free(data_); }

}  // namespace arbiter::cpu
