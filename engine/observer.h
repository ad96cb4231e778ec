// Observes engine events for metrics and logs. The engine calls it on its own
// threads (request threads, the tuning thread), so implementations must be
// cheap and thread-safe; the engine never owns its observer.
#pragma once

#include "engine/problem.h"
#include "engine/selection.h"
#include "engine/status.h"
#include "engine/verdict.h"
#include "engine/verdict_store.h"

namespace arbiter {

// What a sampled live verification concluded about the kernel that served.
enum class VerificationOutcome {
  kPass,         // within budget on the client's operands
  kFail,         // out of budget on the client's operands and again on the daemon's own: quarantined
  kUnconfirmed,  // out of budget on the client's operands only: the data's fault, not quarantined
  kUnjudgeable,  // the reference itself overflows or is not finite there: nothing to judge
};
// "pass", "fail", "unconfirmed", "unjudgeable" (a metric label).
inline const char* VerificationOutcomeName(VerificationOutcome o) {
  switch (o) {
    case VerificationOutcome::kPass: return "pass";
    case VerificationOutcome::kFail: return "fail";
    case VerificationOutcome::kUnconfirmed: return "unconfirmed";
    case VerificationOutcome::kUnjudgeable: return "unjudgeable";
  }
  return "unknown";
}

class ArbiterObserver {
 public:
  virtual ~ArbiterObserver() = default;
  virtual void OnSelection(const Problem&, const Selection&, bool cache_hit) {}
  virtual void OnDispatch(const Problem&, const Selection&, double device_seconds,
                          const absl::Status& status) {}
  virtual void OnTuning(const Problem&, const Verdict&, double wall_seconds) {}
  virtual void OnQuarantine(const QuarantineEntry&) {}
  // Another daemon on the shared store holds the lease on measuring `p`'s bucket:
  // this one waits for its verdict instead of measuring the bucket again.
  virtual void OnLeaseWait(const Problem&) {}
  // A sampled live dispatch was checked against the reference. `max_rel_error` is
  // the kernel's error on the operands that judged it (the daemon's own when a
  // failure was not confirmed); 0 when unjudgeable.
  virtual void OnVerification(const Problem&, const Selection&, double max_rel_error,
                              VerificationOutcome outcome) {}
};

}  // namespace arbiter
