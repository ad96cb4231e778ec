// Measures buckets and turns the figures into stored verdicts. A measurement
// races every candidate eligible for the problem on a leased device stream,
// quarantines (for the problem's dtype) a candidate whose determinism claim was
// disproved, decides against the bucket's previous winner, then stores and
// caches the verdict. At most one measurement per bucket runs at a time: other
// callers asking for that bucket wait for its verdict. Async misses are queued
// (deduplicated by bucket) for one background thread, which skips a bucket that
// was measured while it waited.
//
// Refinement (refinement.h decides, the Tuner measures): a shape inside a
// measured bucket races the bucket verdict's leaders at exactly that shape and
// is stored as its own verdict; where it beats the bucket's winner beyond the
// noise the bucket splits, the other half raced in full. Background refinements
// wait in their own bounded queue, behind buckets with no verdict at all.
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
#include <functional>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/bucket.h"
#include "engine/measurer.h"
#include "engine/observer.h"
#include "engine/quarantine.h"
#include "engine/refinement.h"
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
  RefineOptions refine;    // which candidates race a refinement
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
  // Refines `p` inside its bucket: races the bucket verdict's leaders at exactly
  // `p`, stores the result as `p`'s own verdict and, where its winner beat the
  // bucket's beyond the noise, splits the bucket. Measures the whole bucket
  // instead when it has no fresh verdict or `p` is the shape it was measured at.
  // One refinement per shape at a time.
  absl::StatusOr<Verdict> Refine(const Problem& p);
  // Queues `p`'s bucket for the background thread, unless it is queued or being measured.
  void Enqueue(const Problem& p);
  // Queues a refinement of `p` for the background thread (deduplicated; bounded:
  // dropped when the queue is full).
  void EnqueueRefinement(const Problem& p);
  // The bucket's verdict with its fresh refinements and halves (LoadBucketVerdicts).
  absl::StatusOr<std::optional<Verdict>> LoadBucket(const BucketKey& key);
  // Waits until nothing is queued or being measured (tests, shutdown).
  void WaitIdle();
  // Measurements run since start.
  int64_t measurements() const { return measurements_.load(); }

 private:
  using Result = std::shared_future<absl::StatusOr<Verdict>>;
  // A measurement in flight: the bucket, and the scope's text ("" for the whole bucket).
  using FlightKey = std::pair<BucketKey, std::string>;
  // Why a candidate eligible but not raced appears unmeasured.
  using NotRaced = std::function<std::string(const RegisteredCandidate&)>;

  // Runs `work` unless a measurement of `key` is in flight, whose result it then waits for.
  template <typename Work>
  absl::StatusOr<Verdict> SingleFlight(const FlightKey& key, Work work);
  // Races `racers` (some of `eligible`) at `p` and decides against `incumbent`;
  // every other eligible candidate is listed unmeasured with `not_raced`'s reason.
  // Quarantines disproved claims; stores nothing.
  absl::StatusOr<Verdict> RaceAt(const Problem& p,
                                 const std::vector<const RegisteredCandidate*>& eligible,
                                 const std::vector<const RegisteredCandidate*>& racers,
                                 const std::optional<std::string>& incumbent,
                                 const NotRaced& not_raced);
  absl::StatusOr<Verdict> MeasureBucket(const Problem& p);
  absl::StatusOr<Verdict> RefineShape(const Problem& p, const Verdict& bucket,
                                      const std::vector<const RegisteredCandidate*>& eligible);
  // Splits `bucket` where `refined` (at `p`) disagrees with it, if a half-octave separates them.
  absl::Status Split(const Problem& p, const Verdict& bucket, const Verdict& refined,
                     const std::vector<const RegisteredCandidate*>& eligible);
  // Puts the bucket's verdicts, as the store now holds them, in the cache.
  absl::Status Recache(const BucketKey& key);
  static void Log(const Verdict& v);
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
  std::map<FlightKey, Result> in_flight_ ABSL_GUARDED_BY(mu_);
  std::deque<Problem> queue_ ABSL_GUARDED_BY(mu_);         // one per bucket
  std::deque<Problem> refine_queue_ ABSL_GUARDED_BY(mu_);  // one per shape
  bool busy_ ABSL_GUARDED_BY(mu_) = false;          // the background thread is measuring
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once everything above is built
};

}  // namespace arbiter
