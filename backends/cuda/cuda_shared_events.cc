#include "backends/cuda/cuda_shared_events.h"

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"

namespace arbiter::cuda {
namespace {

class CudaSharedEvents final : public SharedEvents {
 public:
  explicit CudaSharedEvents(int device) : device_(device) {}
  ~CudaSharedEvents() override {
    cudaSetDevice(device_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  CudaSharedEvents(const CudaSharedEvents&) = delete;
  CudaSharedEvents& operator=(const CudaSharedEvents&) = delete;

  absl::Status Add() {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    cudaEvent_t event = nullptr;
    CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&event, cudaEventInterprocess | cudaEventDisableTiming));
    events_.push_back(event);
    cudaIpcEventHandle_t handle;
    CUDA_RETURN_IF_ERROR(cudaIpcGetEventHandle(&handle, event));
    handles_.emplace_back(reinterpret_cast<const char*>(&handle), sizeof handle);
    return absl::OkStatus();
  }

  size_t size() const override { return events_.size(); }
  std::string handle(size_t slot) const override { return handles_.at(slot); }

  absl::Status Record(size_t slot, Stream& stream) override {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(events_.at(slot), Resources(&stream).stream));
    return absl::OkStatus();
  }

  absl::Status Synchronize(size_t slot) override {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    // Recorded long ago in the usual case: a query answers without blocking.
    if (cudaEventQuery(events_.at(slot)) == cudaSuccess) return absl::OkStatus();
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events_.at(slot)));
    return absl::OkStatus();
  }

 private:
  const int device_;
  std::vector<cudaEvent_t> events_;
  std::vector<std::string> handles_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SharedEvents>> CreateCudaSharedEvents(int device, size_t count) {
  auto events = std::make_unique<CudaSharedEvents>(device);
  for (size_t i = 0; i < count; ++i) RETURN_IF_ERROR(events->Add());
  return std::unique_ptr<SharedEvents>(std::move(events));
}

}  // namespace arbiter::cuda
