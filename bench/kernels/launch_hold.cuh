// The daemon's launch hold (Stream::HoldLaunches, backends/cuda/cuda_stream.cc)
// for the nvcc-built benches: the stream waits on a one-thread kernel until the
// host has enqueued a whole sample (flush, events, candidate), so a candidate's
// host-side launch cost never enters its window. Link backends/cuda/device_kernels.cu.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "backends/cuda/device_kernels.h"
#include "bench/kernels/gemm_check.cuh"

namespace arbiter::gemm_check {

class SampleHold {
 public:
  SampleHold() {
    void* words = nullptr;
    CUDA_CHECK(cudaHostAlloc(&words, 2 * sizeof(unsigned), cudaHostAllocMapped));
    host_ = static_cast<unsigned*>(words);
    host_[0] = host_[1] = 0;
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0));
  }
  ~SampleHold() { cudaFreeHost(host_); }
  SampleHold(const SampleHold&) = delete;
  SampleHold& operator=(const SampleHold&) = delete;

  void Hold(cudaStream_t stream) {
    if (++generation_ == 0) ++generation_;
    CUDA_CHECK(cuda::LaunchHold(device_, generation_, kLimitNs, device_ + 1, stream));
  }
  void Release() { __atomic_store_n(&host_[0], generation_, __ATOMIC_SEQ_CST); }
  // Once the held work completed: whether the hold gave up before its release
  // (then counted in expired()).
  bool Completed() {
    const bool expired = __atomic_load_n(&host_[1], __ATOMIC_SEQ_CST) == generation_;
    if (expired) ++expired_;
    return expired;
  }
  int expired() const { return expired_; }

 private:
  static constexpr uint64_t kLimitNs = 20'000'000;
  unsigned* host_ = nullptr;
  unsigned* device_ = nullptr;
  unsigned generation_ = 0;
  int expired_ = 0;
};

}  // namespace arbiter::gemm_check
