#include "server/call_tracker.h"

#include <string_view>

namespace arbiter::server {

// One per call of a counted method; gRPC destroys it with the call.
class TrackedCall final : public grpc::experimental::Interceptor {
 public:
  explicit TrackedCall(CallTracker* tracker) : tracker_(tracker) { tracker_->Begin(); }
  ~TrackedCall() override { tracker_->End(); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  CallTracker* const tracker_;
};

namespace {

class TrackerFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit TrackerFactory(CallTracker* tracker) : tracker_(tracker) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (!CallTracker::Counts(info->method())) return nullptr;
    return new TrackedCall(tracker_);
  }

 private:
  CallTracker* const tracker_;
};

}  // namespace

bool CallTracker::Counts(const char* method) {
  return method != nullptr && std::string_view(method).rfind("/arbiter.v1.", 0) == 0;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
CallTracker::NewInterceptorFactory() {
  return std::make_unique<TrackerFactory>(this);
}

int64_t CallTracker::in_flight() const { return in_flight_.load(std::memory_order_acquire); }

int64_t CallTracker::WaitIdle(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this] { return in_flight_.load(std::memory_order_acquire) == 0; };
  mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
  return in_flight();
}

void CallTracker::Begin() { in_flight_.fetch_add(1, std::memory_order_acq_rel); }

void CallTracker::End() {
  if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last call ended: releasing the mutex makes a waiting WaitIdle read the
  // count again (it reads it under the mutex, so it cannot miss this).
  absl::MutexLock lock(&mu_);
}

}  // namespace arbiter::server
