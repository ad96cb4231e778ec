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

int64_t CallTracker::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

int64_t CallTracker::WaitIdle(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
  return in_flight_;
}

void CallTracker::Begin() {
  absl::MutexLock lock(&mu_);
  ++in_flight_;
}

void CallTracker::End() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

}  // namespace arbiter::server
