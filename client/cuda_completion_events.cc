// The CUDA side of client/completion_events.h: the session's
// cudaIpcEventHandle_t opened once each on the daemon's GPU, waited on by
// cudaEventSynchronize (the host) or cudaStreamWaitEvent (a stream).
#include <cuda_runtime_api.h>

#include <cstring>

#include "client/completion_events.h"

namespace arbiter::client {
namespace {

grpc::Status CudaFailure(const char* call, cudaError_t err) {
  return grpc::Status(grpc::StatusCode::INTERNAL, std::string(call) + " failed: " +
                                                      cudaGetErrorName(err) + " (" +
                                                      cudaGetErrorString(err) + ")");
}

class CudaCompletionEvents final : public CompletionEvents {
 public:
  CudaCompletionEvents(int device, size_t slots) : CompletionEvents(slots), device_(device) {}
  ~CudaCompletionEvents() override {
    cudaSetDevice(device_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  grpc::Status OpenAll(const std::vector<std::string>& handles) {
    if (cudaError_t err = cudaSetDevice(device_); err != cudaSuccess) {
      return CudaFailure("cudaSetDevice", err);
    }
    for (const std::string& bytes : handles) {
      cudaIpcEventHandle_t handle;
      if (bytes.size() != sizeof handle) {
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            "a completion event handle of " + std::to_string(bytes.size()) +
                                " bytes; expected " + std::to_string(sizeof handle));
      }
      std::memcpy(&handle, bytes.data(), sizeof handle);
      cudaEvent_t event = nullptr;
      if (cudaError_t err = cudaIpcOpenEventHandle(&event, handle); err != cudaSuccess) {
        return CudaFailure("cudaIpcOpenEventHandle", err);
      }
      events_.push_back(event);
    }
    return grpc::Status::OK;
  }

 protected:
  grpc::Status Wait(int slot, void* stream) override {
    if (cudaError_t err = cudaSetDevice(device_); err != cudaSuccess) {
      return CudaFailure("cudaSetDevice", err);
    }
    const cudaError_t err =
        stream == nullptr
            ? cudaEventSynchronize(events_[slot])
            : cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), events_[slot], 0);
    if (err != cudaSuccess) {
      return CudaFailure(stream == nullptr ? "cudaEventSynchronize" : "cudaStreamWaitEvent", err);
    }
    return grpc::Status::OK;
  }

 private:
  const int device_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

grpc::Status OpenCudaCompletionEvents(const std::vector<std::string>& handles, int device,
                                      std::unique_ptr<CompletionEvents>* out) {
  auto events = std::make_unique<CudaCompletionEvents>(device, handles.size());
  if (grpc::Status s = events->OpenAll(handles); !s.ok()) return s;
  *out = std::move(events);
  return grpc::Status::OK;
}

}  // namespace arbiter::client
