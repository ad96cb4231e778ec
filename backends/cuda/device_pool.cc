#include "backends/cuda/device_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_check.h"

namespace arbiter::cuda {

class DevicePool::PoolBuffer final : public Buffer {
 public:
  PoolBuffer(std::shared_ptr<DevicePool> pool, void* data, size_t bytes)
      : pool_(std::move(pool)), data_(data), bytes_(bytes) {}
  ~PoolBuffer() override { pool_->Free(data_); }
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;

  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  std::shared_ptr<DevicePool> pool_;
  void* data_;
  size_t bytes_;
};

absl::StatusOr<std::shared_ptr<DevicePool>> DevicePool::Create(int device,
                                                                uint64_t release_threshold) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&pool, &props));
  uint64_t threshold = release_threshold;
  if (absl::Status s =
          CUDA_STATUS(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
      !s.ok()) {
    cudaMemPoolDestroy(pool);
    return s;
  }
  cudaStream_t order = nullptr;
  cudaEvent_t fence = nullptr;
  absl::Status s = CUDA_STATUS(cudaStreamCreateWithFlags(&order, cudaStreamNonBlocking));
  if (s.ok()) s = CUDA_STATUS(cudaEventCreateWithFlags(&fence, cudaEventDisableTiming));
  if (!s.ok()) {
    if (order != nullptr) cudaStreamDestroy(order);
    cudaMemPoolDestroy(pool);
    return s;
  }
  return std::shared_ptr<DevicePool>(new DevicePool(device, pool, order, fence));
}

DevicePool::~DevicePool() {
  // Every buffer and stream holding this pool is gone: nothing else is enqueued.
  cudaSetDevice(device_);
  cudaStreamSynchronize(order_);
  cudaEventDestroy(fence_);
  cudaStreamDestroy(order_);
  cudaMemPoolDestroy(pool_);
}

absl::StatusOr<std::unique_ptr<Buffer>> DevicePool::Allocate(size_t bytes) {
  void* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    // A zero-byte request still gets a distinct block, so data() is never null.
    CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&data, bytes == 0 ? 1 : bytes, pool_, order_));
    // Synchronizing the allocating stream makes the block usable from any stream.
    if (absl::Status s = CUDA_STATUS(cudaStreamSynchronize(order_)); !s.ok()) {
      cudaFreeAsync(data, order_);
      return s;
    }
  }
  return std::unique_ptr<Buffer>(new PoolBuffer(shared_from_this(), data, bytes));
}

void DevicePool::Free(void* data) {
  std::lock_guard<std::mutex> lock(mu_);
  cudaSetDevice(device_);
  for (cudaStream_t s : streams_) {
    // Errors here are recorded as sticky if they are; a free cannot report them.
    (void)CUDA_STATUS(cudaEventRecord(fence_, s));
    (void)CUDA_STATUS(cudaStreamWaitEvent(order_, fence_, 0));
  }
  (void)CUDA_STATUS(cudaFreeAsync(data, order_));
}

void DevicePool::AddStream(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.insert(stream);
}

void DevicePool::RemoveStream(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(stream);
}

absl::Status DevicePool::Probe() const {
  const cudaError_t err = cudaStreamQuery(order_);
  if (err == cudaSuccess || err == cudaErrorNotReady) return absl::OkStatus();
  return CUDA_STATUS(err);
}

}  // namespace arbiter::cuda
