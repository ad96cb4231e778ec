// Device memory for one CUDA device, from a stream-ordered memory pool
// (cudaMallocFromPoolAsync) with a release threshold, so repeated requests
// reuse memory instead of calling cudaMalloc each time.
//
// Allocation and free are ordered on the pool's own stream. A freed block is
// reused only after all work enqueued so far on every registered stream (the
// backend's worker streams) has finished: the free waits on an event recorded
// on each of them, so a block can never be handed out while a kernel still
// reads it.
//
// Owned through shared_ptr by the backend, its streams and its buffers: the
// last of them frees the pool. Thread-safe: one mutex guards the stream set
// and the ordering stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>

#include <cuda_runtime_api.h>

#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter::cuda {

class DevicePool : public std::enable_shared_from_this<DevicePool> {
 public:
  static absl::StatusOr<std::shared_ptr<DevicePool>> Create(int device,
                                                            uint64_t release_threshold);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // A block of at least `bytes` (256-byte aligned), usable on any stream once returned.
  absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes);

  // Streams whose enqueued work every later free waits for.
  void AddStream(cudaStream_t stream);
  void RemoveStream(cudaStream_t stream);

  int device() const { return device_; }
  // A sticky device error, if the ordering stream has seen one (OK otherwise).
  absl::Status Probe() const;

 private:
  class PoolBuffer;
  DevicePool(int device, cudaMemPool_t pool, cudaStream_t order, cudaEvent_t fence)
      : device_(device), pool_(pool), order_(order), fence_(fence) {}
  void Free(void* data);

  const int device_;
  cudaMemPool_t pool_;
  std::mutex mu_;                   // guards streams_ and the use of order_ and fence_
  cudaStream_t order_;              // allocations and frees, in order
  cudaEvent_t fence_;               // recorded on each worker stream before a free
  std::set<cudaStream_t> streams_;  // guarded by mu_
};

}  // namespace arbiter::cuda
