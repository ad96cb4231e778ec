// Host memory for the CPU backend: 256-byte aligned - the operand alignment
// the engine promises every candidate (kOperandAlignment in engine/arbiter.h),
// and more than the cache line and widest vector load the CPU kernels need -
// freed by the destructor.
//
// Not thread-safe: one owner, like every Buffer.
#pragma once

#include <cstddef>
#include <memory>

#include "engine/backend.h"

namespace arbiter::cpu {

class HostBuffer final : public Buffer {
 public:
  static constexpr size_t kAlignment = 256;

  // RESOURCE_EXHAUSTED when the allocation fails.
  static absl::StatusOr<std::unique_ptr<HostBuffer>> Create(size_t bytes);
  ~HostBuffer() override;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() override { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  HostBuffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  void* data_;
  size_t bytes_;
};

}  // namespace arbiter::cpu
