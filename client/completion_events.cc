#include "client/completion_events.h"

#include "client/device_operands.h"

namespace arbiter::client {

void CompletionEvents::Prepare(v1::MatmulRequest* request) {
  request->set_completion(v1::COMPLETION_EVENT);
  request->clear_done_event_slots();
  std::lock_guard<std::mutex> lock(mu_);
  for (int slot : waited_) request->add_done_event_slots(slot);
  waited_.clear();
}

grpc::Status CompletionEvents::Synchronize(const v1::MatmulResponse& response) {
  return WaitFor(response, nullptr);
}

grpc::Status CompletionEvents::StreamWait(const v1::MatmulResponse& response, void* stream) {
  if (stream == nullptr) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "StreamWait: no stream given; Synchronize waits on the host");
  }
  return WaitFor(response, stream);
}

grpc::Status CompletionEvents::WaitFor(const v1::MatmulResponse& response, void* stream) {
  if (response.completion() != v1::COMPLETION_EVENT) return grpc::Status::OK;  // complete already
  const int slot = response.event_slot();
  if (slot < 0 || static_cast<size_t>(slot) >= slots_) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the reply names completion event slot " + std::to_string(slot) +
                            " of " + std::to_string(slots_));
  }
  if (grpc::Status s = Wait(slot, stream); !s.ok()) return s;
  // The wait is enqueued (or over): the daemon may record the slot again.
  std::lock_guard<std::mutex> lock(mu_);
  waited_.push_back(slot);
  return grpc::Status::OK;
}

grpc::Status CompletionEvents::Open(ArbiterClient& client, const std::string& uuid,
                                    std::unique_ptr<CompletionEvents>* out) {
#ifdef ARBITER_CTL_WITH_CUDA
  std::vector<std::string> handles;
  if (grpc::Status s = client.GetCompletionEvents(&handles); !s.ok()) return s;
  int device = 0;
  if (grpc::Status s = FindCudaDevice(uuid, &device); !s.ok()) return s;
  return OpenCudaCompletionEvents(handles, device, out);
#else
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "completion events are CUDA events: this build has no CUDA");
#endif
}

}  // namespace arbiter::client
