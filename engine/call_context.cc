#include "engine/call_context.h"

#include "absl/strings/str_cat.h"

namespace arbiter {

absl::Status CallContext::StillWaiting(const char* where) const {
  if (cancelled && cancelled()) {
    return absl::CancelledError(absl::StrCat("the client went away ", where));
  }
  if (deadline) {
    const auto now = std::chrono::system_clock::now();
    if (now > *deadline) {
      const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(now - *deadline);
      return absl::DeadlineExceededError(
          absl::StrCat("deadline passed ", late.count(), " ms ago ", where));
    }
  }
  return absl::OkStatus();
}

absl::Time CallContext::WakeBy() const {
  absl::Time wake = deadline ? absl::FromChrono(*deadline) : absl::InfiniteFuture();
  if (cancelled) wake = std::min(wake, absl::Now() + kCancelPollInterval);
  return wake;
}

}  // namespace arbiter
