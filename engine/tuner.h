// Measures buckets and turns the figures into stored verdicts. A measurement
// races every candidate eligible for the problem on a leased device stream,
// quarantines (for the problem's dtype) a candidate whose determinism claim was
// disproved, decides against the bucket's previous winner, then stores and
// caches the verdict. At most one measurement per bucket runs at a time: other
// callers asking for that bucket wait for its verdict. Async misses are queued
// (deduplicated by bucket) for one background thread, which skips a bucket that
// was measured while it waited.
//
// Ownership: borrows the backend, registry, store, stream pool, quarantine and
// verdict cache (the Arbiter owns them and destroys the Tuner first); owns its
// background thread. Never owns its observer.
// Thread-safe: provides internal synchronization (one mutex over the queue and
// the measurements in flight).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/bucket.h"
#include "engine/measurer.h"
#include "engine/observer.h"
#include "engine/quarantine.h"
#include "engine/registry.h"
#include "engine/selection.h"
#include "engine/status.h"
#include "engine/stream_pool.h"
#include "engine/verdict.h"
#include "engine/verdict_cache.h"
#include "engine/verdict_store.h"

namespace arbiter {

struct TunerOptions {
  MeasureOptions measure;  // how a bucket is measured
  NoisePolicy noise;       // when a challenger displaces the incumbent
};

class Tuner {
 public:
  // Starts the background thread.
  Tuner(const TunerOptions& options, Backend& backend, const Registry& registry,
        VerdictStore& store, StreamPool& streams, Quarantine& quarantine, VerdictCache& cache);
  ~Tuner();  // drops queued work, waits for the background measurement in progress
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // Set before the engine serves; not synchronized.
  void set_observer(ArbiterObserver* observer) { observer_ = observer; }

  // Measures `p`'s bucket at `p`'s shape, or waits for the measurement of that
  // bucket already running. `p` must be valid (ValidateProblem).
  absl::StatusOr<Verdict> MeasureOnce(const Problem& p);
  // Queues `p`'s bucket for the background thread, unless it is queued or being measured.
  void Enqueue(const Problem& p);
  // Waits until nothing is queued or being measured (tests, shutdown).
  void WaitIdle();
  // Measurements run since start.
  int64_t measurements() const { return measurements_.load(); }

 private:
  using Result = std::shared_future<absl::StatusOr<Verdict>>;

  absl::StatusOr<Verdict> MeasureBucket(const Problem& p);
  // Whether a verdict that would be served for `p` (same raced name@version set) is stored.
  bool HasFreshVerdict(const Problem& p);
  void BackgroundLoop();

  const TunerOptions options_;
  Backend& backend_;
  const Registry& registry_;
  VerdictStore& store_;
  StreamPool& streams_;
  Quarantine& quarantine_;
  VerdictCache& cache_;
  const std::string fingerprint_;
  ArbiterObserver* observer_ = nullptr;
  std::atomic<int64_t> measurements_{0};

  absl::Mutex mu_;
  absl::CondVar changed_;  // signalled when a measurement ends or queued work arrives
  std::map<BucketKey, Result> in_flight_ ABSL_GUARDED_BY(mu_);
  std::deque<Problem> queue_ ABSL_GUARDED_BY(mu_);  // one per bucket
  bool busy_ ABSL_GUARDED_BY(mu_) = false;          // the background thread is measuring
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once everything above is built
};

}  // namespace arbiter
