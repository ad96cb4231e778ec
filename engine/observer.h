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
  // A sampled live dispatch was checked against the reference.
  virtual void OnVerification(const Problem&, const Selection&, double max_rel_error, bool pass) {}
};

}  // namespace arbiter
