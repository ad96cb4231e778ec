// Measures buckets and turns the figures into stored verdicts. A measurement
// races every candidate eligible for the problem on a leased device stream,
// quarantines (for the problem's dtype) a candidate whose determinism claim was
// disproved, decides against the bucket's previous winner, then stores and
// caches the verdict. At most one measurement per bucket runs at a time: other
// callers asking for that bucket wait for its verdict. Async misses are queued
// (deduplicated by bucket) for one background thread, which skips a bucket that
// was measured while it waited. A bucket this daemon set aside from a shared
// store (NodeVerdicts) is measured and kept here, never written to the store.
//
// Across a fleet sharing a store, one daemon measures a bucket at a time: the
// measurer holds the store's lease on (fingerprint, dtype, bucket). A daemon
// that finds the lease held waits for the holder's verdict (a serving miss, up
// to its deadline), or leaves the bucket to the holder (background tuning). A
// holder that dies loses its lease, so a waiter then takes it and measures.
// When the store cannot grant leases (it is down), the daemon measures alone,
// serves what it measured, and writes it back when the store answers again
// (unless another daemon stored a verdict for the bucket meanwhile).
//
// Refinement (refinement.h decides, the Tuner measures): a shape inside a
// measured bucket races the bucket verdict's leaders at exactly that shape and
// is stored as its own verdict; where it beats the bucket's winner beyond the
// noise the bucket splits, the other half raced in full. Background refinements
// wait in their own bounded queue, behind buckets with no verdict at all. A
// bucket set aside for this node is not refined: tune measures it again.
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
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/bucket.h"
#include "engine/dispatcher.h"
#include "engine/measurer.h"
#include "engine/node_verdicts.h"
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
  // How often a daemon waiting on another's lease looks again (sooner when the store
  // reports new verdicts): the lease of a holder that died is taken this late at worst.
  std::chrono::milliseconds lease_poll{100};
};

// What a MeasureOnce call wants when the bucket may already be measured or being
// measured elsewhere in the fleet.
struct MeasureCall {
  // While another daemon holds the bucket's lease, wait for its verdict until then
  // (DEADLINE_EXCEEDED after); unset: until the holder finishes or dies.
  Deadline deadline;
  // Measure even when a verdict that would be served is stored (an operator's tune);
  // otherwise such a verdict, stored by another daemon meanwhile, is returned as is.
  bool remeasure = false;
  // false: return ABORTED at once when another daemon holds the lease (background
  // tuning: the holder's verdict will reach the store).
  bool wait = true;
};

class Tuner {
 public:
  // Starts the background thread.
  Tuner(const TunerOptions& options, Backend& backend, const Registry& registry,
        VerdictStore& store, NodeVerdicts& node_verdicts, StreamPool& streams,
        Quarantine& quarantine, VerdictCache& cache);
  ~Tuner();  // drops queued work, waits for the background measurement in progress
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // Set before the engine serves; not synchronized.
  void set_observer(ArbiterObserver* observer) { observer_ = observer; }

  // Measures `p`'s bucket at `p`'s shape, or waits for the measurement of that
  // bucket already running here or (per `call`) on another daemon of the fleet.
  // `p` must be valid (ValidateProblem).
  absl::StatusOr<Verdict> MeasureOnce(const Problem& p, const MeasureCall& call = {});
  // Refines `p` inside its bucket: races the bucket verdict's leaders at exactly
  // `p`, stores the result as `p`'s own verdict and, where its winner beat the
  // bucket's beyond the noise, splits the bucket. Measures the whole bucket
  // instead (MeasureOnce with `call`) when it has no fresh verdict in the store,
  // `p` is the shape it was measured at, or the bucket is set aside for this node.
  // One refinement per shape at a time.
  absl::StatusOr<Verdict> Refine(const Problem& p, const MeasureCall& call = {});
  // Queues `p`'s bucket for the background thread, unless it is queued or being measured.
  void Enqueue(const Problem& p);
  // Queues a refinement of `p` for the background thread (deduplicated; bounded:
  // dropped when the queue is full).
  void EnqueueRefinement(const Problem& p);
  // The bucket's verdict in the store with its fresh refinements and halves (LoadBucketVerdicts).
  absl::StatusOr<std::optional<Verdict>> LoadBucket(const BucketKey& key);
  // Waits until nothing is queued or being measured (tests, shutdown).
  void WaitIdle();
  // Measurements run since start.
  int64_t measurements() const { return measurements_.load(); }
  // The store reports new verdicts: a daemon waiting on another's lease looks now,
  // and verdicts waiting for the store are written back.
  void OnVerdictsChanged();
  // A verdict measured while the store was down, not yet written back.
  std::optional<Verdict> Pending(const BucketKey& key);
  // How many such verdicts wait for the store.
  size_t pending_writes();

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
  absl::StatusOr<Verdict> MeasureBucket(const Problem& p, const MeasureCall& call);
  absl::StatusOr<Verdict> RefineShape(const Problem& p, const Verdict& bucket,
                                      const std::vector<const RegisteredCandidate*>& eligible);
  // Splits `bucket` where `refined` (at `p`) disagrees with it, if a half-octave separates them.
  absl::Status Split(const Problem& p, const Verdict& bucket, const Verdict& refined,
                     const std::vector<const RegisteredCandidate*>& eligible);
  // Puts the bucket's verdicts, as the store now holds them, in the cache.
  absl::Status Recache(const BucketKey& key);
  // Caches `v` as `key`'s verdict, with the refinements and halves the store
  // holds beside it when `v` is the store's own.
  void CacheBucket(const BucketKey& key, const Verdict& v);
  static void Log(const Verdict& v);
  // The served verdict for `p` when it raced exactly the candidates eligible now.
  std::optional<Verdict> FreshVerdict(const Problem& p);
  // Takes the fleet's lease on `p`'s bucket, waiting per `call` while another daemon
  // holds it; sets `theirs` instead when that daemon's verdict arrives meanwhile.
  // A null lease with no `theirs`: the store cannot grant leases (measure alone).
  absl::StatusOr<std::unique_ptr<StoreLease>> TakeLease(const Problem& p, const MeasureCall& call,
                                                        std::optional<Verdict>* theirs);
  // Whether a verdict that would be served for `p` (same raced name@version set) is stored.
  bool HasFreshVerdict(const Problem& p);
  // The verdict this daemon serves for `key` from the store or its own set-aside
  // verdicts; nullopt when there is none (or the store cannot answer).
  std::optional<Verdict> Current(const BucketKey& key);
  void BackgroundLoop();
  // Writes pending verdicts to the store; stops at the first it cannot reach.
  void WriteBack();

  const TunerOptions options_;
  Backend& backend_;
  const Registry& registry_;
  VerdictStore& store_;
  NodeVerdicts& node_verdicts_;
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
  std::map<BucketKey, Verdict> pending_ ABSL_GUARDED_BY(mu_);  // measured, the store was down
  bool busy_ ABSL_GUARDED_BY(mu_) = false;          // the background thread is measuring
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once everything above is built
};

}  // namespace arbiter
