// Arrival counters kept per device stream, for one-launch kernels whose CTAs
// count arrivals in global memory (the last to arrive finishes the sum).
// Not in the launch's workspace: the stream's scratch is shared with other
// candidates, which leave anything there. The counters are zeroed (in stream
// order) when first handed out; every launch must leave them at zero, and
// launches on one stream never overlap, so each launch finds them at zero.
// The default and per-thread streams are keyed by thread as well.
// Plain C++ (host only). Thread-safe: one mutex per Family; counters are never freed.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include <cuda_runtime_api.h>

namespace arbiter::kernels {

// `Family` keeps one family's counters apart from another's; kCount counters a stream.
// cudaErrorStreamCaptureUnsupported at a stream's first use while it is capturing.
template <typename Family, size_t kCount>
cudaError_t StreamArrivalCounters(cudaStream_t stream, unsigned** out) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const bool shared_handle = stream == nullptr || stream == cudaStreamPerThread;
  using Key = std::tuple<int, cudaStream_t, std::thread::id>;
  const Key key{device, stream, shared_handle ? std::this_thread::get_id() : std::thread::id()};
  static std::mutex mu;
  static auto* counters = new std::map<Key, unsigned*>();  // guarded by mu; never freed
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = counters->find(key); it != counters->end()) {
    *out = it->second;
    return cudaSuccess;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  err = cudaStreamIsCapturing(stream, &capture);
  if (err != cudaSuccess) return err;
  if (capture != cudaStreamCaptureStatusNone) return cudaErrorStreamCaptureUnsupported;
  unsigned* p = nullptr;
  err = cudaMalloc(&p, kCount * sizeof(unsigned));
  if (err != cudaSuccess) return err;
  err = cudaMemsetAsync(p, 0, kCount * sizeof(unsigned), stream);
  if (err != cudaSuccess) {
    cudaFree(p);
    return err;
  }
  counters->emplace(key, p);
  *out = p;
  return cudaSuccess;
}

}  // namespace arbiter::kernels
