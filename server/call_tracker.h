// Counts the calls to arbiterd's own services (arbiter.v1.*) that are in
// flight: from the moment gRPC creates a call until it destroys it, its reply
// sent. A server interceptor does the counting (one per call: counted when
// built, uncounted when destroyed).
//
// Why: gRPC's Server::Shutdown(deadline) waits for every client connection to
// close, not just for the calls - a client that keeps an idle channel open holds
// the shutdown until the deadline. The daemon waits for these calls instead and
// then drops the connections left (Daemon::Shutdown). Health and reflection
// calls are not counted: a health Watch stream lasts as long as its client.
//
// Thread-safe: provides internal synchronization. The count is an atomic, so a
// call's begin and end take no lock (every Select and Matmul passes here); the
// mutex is taken only by WaitIdle and by the end that brings the count to zero,
// to wake it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <grpcpp/support/server_interceptor.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace arbiter::server {

class CallTracker {
 public:
  CallTracker() = default;
  CallTracker(const CallTracker&) = delete;
  CallTracker& operator=(const CallTracker&) = delete;

  // For ServerBuilder::experimental().SetInterceptorCreators; must not outlive the tracker.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewInterceptorFactory();

  // Calls in flight now.
  int64_t in_flight() const;
  // Waits until no call is in flight, or `deadline`. Returns the number still in flight.
  int64_t WaitIdle(absl::Time deadline) const;

  // Whether calls to `method` ("/package.Service/Method") are counted.
  static bool Counts(const char* method);

 private:
  friend class TrackedCall;
  void Begin();
  void End();

  std::atomic<int64_t> in_flight_{0};
  mutable absl::Mutex mu_;  // WaitIdle's condition is re-read whenever it is released
};

}  // namespace arbiter::server
