// Completion by event, the client's side (MatmulRequest.completion = EVENT):
// the session's ring of completion events, each opened once, and the
// acknowledgements the daemon's reuse rule needs. A Matmul asked for with
// Prepare comes back as soon as the daemon has enqueued its kernel; the
// client waits on the slot the reply names - on the host (Synchronize) or on
// one of its own streams (StreamWait) - before it reads C, and the slot goes
// back to the daemon on the next Prepare, once that wait is enqueued.
//
//   std::unique_ptr<CompletionEvents> events;
//   CompletionEvents::Open(client, info.uuid(), &events);
//   events->Prepare(&request);               // completion = EVENT, acks
//   client.Matmul(request, &response);
//   events->Synchronize(response);            // C is complete
//
// A SYNC reply (the daemon completed C before replying) needs no wait: both
// waits return at once. Thread-safe: the pending acknowledgements have a mutex;
// the events are CUDA's, safe to wait on from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/arbiter_client.h"

namespace arbiter::client {

class CompletionEvents {
 public:
  virtual ~CompletionEvents() = default;
  CompletionEvents(const CompletionEvents&) = delete;
  CompletionEvents& operator=(const CompletionEvents&) = delete;

  // Opens the events of `client`'s session (GetCompletionEvents) on the GPU
  // whose UUID is `uuid` ("": device 0). FAILED_PRECONDITION in a build
  // without CUDA, and as the daemon answers where it has no events.
  static grpc::Status Open(ArbiterClient& client, const std::string& uuid,
                           std::unique_ptr<CompletionEvents>* out);

  // Asks `request` for completion by event, and gives back every slot waited
  // on since the last Prepare (done_event_slots).
  void Prepare(v1::MatmulRequest* request);
  // Returns once `response`'s C is complete (cudaEventSynchronize on its slot).
  grpc::Status Synchronize(const v1::MatmulResponse& response);
  // Makes `stream` (a cudaStream_t of the daemon's GPU) wait until `response`'s
  // C is complete (cudaStreamWaitEvent); returns at once.
  grpc::Status StreamWait(const v1::MatmulResponse& response, void* stream);

  size_t slots() const { return slots_; }

 protected:
  explicit CompletionEvents(size_t slots) : slots_(slots) {}
  // Waits on slot `slot`'s event: on the host when `stream` is null, else enqueued on it.
  virtual grpc::Status Wait(int slot, void* stream) = 0;

 private:
  grpc::Status WaitFor(const v1::MatmulResponse& response, void* stream);

  const size_t slots_;
  std::mutex mu_;
  std::vector<int> waited_;  // slots to acknowledge on the next Prepare; guarded by mu_
};

#ifdef ARBITER_CTL_WITH_CUDA
// cuda_completion_events.cc: the handles opened on `device` (a CUDA ordinal).
grpc::Status OpenCudaCompletionEvents(const std::vector<std::string>& handles, int device,
                                      std::unique_ptr<CompletionEvents>* out);
#endif

}  // namespace arbiter::client
