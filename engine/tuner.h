// Measures buckets and turns the figures into stored verdicts, on one measuring
// thread. A measurement races every candidate eligible for the problem on a
// leased device stream, quarantines (for the problem's dtype) a candidate whose
// determinism claim was disproved, decides against the bucket's previous
// winner, then stores and caches the verdict. A bucket this daemon set aside
// from a shared store (NodeVerdicts) is measured and kept here, never written to
// the store.
//
// Across a fleet sharing a store, one daemon measures a bucket at a time: the
// measurer holds the store's lease on (fingerprint, dtype, bucket). While
// another daemon holds it, a bucket someone here waits for waits for the
// holder's verdict (until nobody waits for it any more); a background one is
// left to the holder. A holder that dies loses its lease, so a waiter then takes
// it and measures. When the store cannot grant leases (it is down), the daemon
// measures alone, serves what it measured, and writes it back when the store
// answers again (unless another daemon stored a verdict for the bucket meanwhile).
//
// Refinement (refinement.h decides, the Tuner measures): a shape inside a
// measured bucket races the bucket verdict's leaders and tile entrants at
// exactly that shape, under a device budget of its own, and is stored as its
// own verdict; where it beats the bucket's winner beyond the noise the bucket
// splits, the other half taking that race's figures. A bucket set aside for
// this node is not refined: it is measured again whole.
// (The refinement jobs are in tuner_refinement.cc; the queue and the bucket's
// race in tuner.cc.)
//
// Work is a queue of jobs, one per (bucket, scope) however many callers ask for
// it: a bucket's measurement (scope whole) and a refinement of one shape in it
// are apart. A synchronous caller (MeasureOnce, Refine) joins its job and waits
// for the verdict only while it still waits itself (CallContext); a bucket's job
// that finds a fresh verdict stored by the time it runs answers with it (unless
// an operator asked to measure again: MeasureCall::remeasure); a background
// job (Enqueue, EnqueueRefinement) is measured even if nobody waits. A job
// nobody waits for any more and that is not background is dropped - taken off
// the queue, or, when it is running, stopped at its next checkpoint. The queue
// is bounded in jobs and per peer (RESOURCE_EXHAUSTED past either); background
// refinements have a bound of their own and are dropped past it, and run only
// when nothing else is queued. A refinement takes the fleet's lease on its
// (bucket, scope), as a bucket's measurement takes the bucket's.
//
// While measuring, the Tuner is the measurer's MeasureHooks: between candidates
// and timed repeats it lends the stream to queued dispatches (StreamPool::Yield),
// stops a dropped or shut-down measurement, and checks the device's health.
// Before each candidate's launches it records the intent in the journal (when
// there is one), and a watchdog thread takes a candidate that shows no progress
// for `hang_seconds` for hung. A hang or a device fault is reported through
// `on_fault` with the cause in the journal: the daemon exits and, restarted by
// its supervisor, quarantines the candidate (Arbiter::Create).
//
// Ownership: borrows the backend, registry, store, node verdicts, stream pool,
// quarantine, verdict cache and journal (the Arbiter owns them and destroys the Tuner
// first); owns its measuring and watchdog threads. Never owns its observer.
// Thread-safe: provides internal synchronization (one mutex over the queue, one
// over the watchdog's view of the running candidate).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/bucket.h"
#include "engine/call_context.h"
#include "engine/intent_journal.h"
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
  MeasureOptions measure;          // how a bucket is measured
  NoisePolicy noise;               // when a challenger displaces the incumbent
  size_t max_queued = 64;          // buckets queued or being measured; more: RESOURCE_EXHAUSTED
  size_t max_queued_per_peer = 8;  // of those, asked for by one peer (CallContext::peer)
  // Background refinements queued at most (not counted in max_queued); more are dropped
  // and told to on_refinement_lost, so a hot shape that missed its turn becomes hot again.
  size_t max_queued_refinements = 256;
  RefineOptions refine;            // which candidates race a refinement
  double hang_seconds = 300;       // a candidate under measurement that shows no progress (no
                                   // launch, no checkpoint) for this long has hung
  // Called (on the measuring or watchdog thread) when a candidate hung or faulted the
  // device: the engine cannot go on, and the intent journal names the candidate and the
  // cause. The daemon exits so its supervisor restarts it. Unset: the fault is only logged.
  std::function<void(const absl::Status&)> on_fault;
  // Called with the shape of a background refinement that failed (on the measuring
  // thread, with the Tuner's lock held: it must not call the Tuner) or was not queued
  // (on EnqueueRefinement's caller), so that whoever counted the shape hot lets it
  // become hot again. Unset: nobody is told.
  std::function<void(const Problem&)> on_refinement_lost;
  // How often a measurement waiting on another daemon's lease looks again (sooner when
  // the store reports new verdicts): the lease of a holder that died is taken this late at worst.
  std::chrono::milliseconds lease_poll{100};
};

// What a MeasureOnce call wants beyond waiting (CallContext).
struct MeasureCall {
  // Measure even when a verdict that would be served is stored (an operator's tune);
  // otherwise such a verdict, stored by another daemon meanwhile, is returned as is.
  bool remeasure = false;
};

class Tuner {
 public:
  // Starts the measuring and watchdog threads. `journal` may be null (no intent is kept).
  Tuner(const TunerOptions& options, Backend& backend, const Registry& registry,
        VerdictStore& store, NodeVerdicts& node_verdicts, StreamPool& streams,
        Quarantine& quarantine, VerdictCache& cache, IntentJournal* journal);
  ~Tuner();  // Shutdown, then waits for the measurement in progress
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // Set before the engine serves; not synchronized.
  void set_observer(ArbiterObserver* observer) { observer_ = observer; }

  // Measures `p`'s bucket at `p`'s shape - or joins the entry of that bucket
  // already queued or running - and waits for its verdict while `caller` waits:
  // DEADLINE_EXCEEDED or CANCELLED once it stops (the entry is dropped if nobody
  // else waits and it is not background). RESOURCE_EXHAUSTED when a new entry
  // would pass a queue limit; UNAVAILABLE once shutting down. `p` must be valid.
  absl::StatusOr<Verdict> MeasureOnce(const Problem& p, const CallContext& caller = {},
                                      const MeasureCall& call = {});
  // Refines `p` inside its bucket: races the bucket verdict's leaders at exactly
  // `p`, stores the result as `p`'s own verdict and, where its winner beat the
  // bucket's beyond the noise, splits the bucket. Measures the whole bucket
  // instead (as MeasureOnce) when it has no fresh verdict in the store, `p` is the
  // shape it was measured at, or the bucket is set aside for this node. Waits as
  // MeasureOnce does.
  absl::StatusOr<Verdict> Refine(const Problem& p, const CallContext& caller = {},
                                 const MeasureCall& call = {});
  // Queues `p`'s bucket for the background (measured even if nobody waits),
  // unless it is queued or being measured. RESOURCE_EXHAUSTED when a new entry
  // would pass a queue limit (charged to `peer`); UNAVAILABLE once shutting down.
  absl::Status Enqueue(const Problem& p, const std::string& peer = "");
  // Queues a refinement of `p` for the background, behind every other job
  // (deduplicated; dropped past max_queued_refinements or once shutting down).
  // A refinement that fails or is dropped is reported to on_refinement_lost.
  void EnqueueRefinement(const Problem& p);
  // The bucket's verdict in the store with its fresh refinements and halves (LoadBucketVerdicts).
  absl::StatusOr<std::optional<Verdict>> LoadBucket(const BucketKey& key);

  // Refuses new work, drops what is queued (its waiters get UNAVAILABLE) and
  // stops the running measurement at its next checkpoint. Returns at once.
  void Shutdown();
  // After Shutdown: waits until no measurement runs, until `deadline`. False when
  // one still runs then (a kernel that has not returned).
  bool WaitStopped(std::chrono::steady_clock::time_point deadline);
  // The process exits with a measurement still running (the shutdown grace is
  // spent): forgets the intent, so the candidate is not blamed on restart.
  void Abandon();
  // Waits until nothing is queued or being measured (tests).
  void WaitIdle();

  // Measurements run since start.
  int64_t measurements() const { return measurements_.load(); }
  // Jobs (buckets and refinements) queued or being measured now.
  size_t queued() const;
  // The store reports new verdicts: a measurement waiting on another's lease looks now,
  // and verdicts waiting for the store are written back.
  void OnVerdictsChanged();
  // A verdict measured while the store was down, not yet written back.
  std::optional<Verdict> Pending(const BucketKey& key);
  // How many such verdicts wait for the store.
  size_t pending_writes();

 private:
  // A job's identity: the bucket, and the scope's text ("" for the whole bucket).
  using JobKey = std::pair<BucketKey, std::string>;
  // One bucket to measure, or one shape of it to refine, however many callers
  // asked for it. The flags past `peer` are guarded by the Tuner's `mu_`.
  struct Job {
    Problem problem;  // the shape measured: the first caller's (a refinement's own)
    JobKey key;
    bool refinement = false;       // refine `problem` inside its bucket (else measure the bucket)
    bool refinement_slot = false;  // counted against max_queued_refinements, not max_queued
    std::string peer;              // charged for it (empty: nobody)
    int waiters = 0;               // synchronous callers waiting for its verdict
    bool background = false;       // measured even if nobody waits
    bool remeasure = false;        // measured even over a fresh verdict (an operator's tune)
    bool running = false;
    bool done = false;
    bool drop = false;     // nobody wants it any more: stop at the next checkpoint
    bool stopped = false;  // it was stopped because of `drop` or shutdown
    absl::StatusOr<Verdict> result = absl::UnknownError("not measured yet");

    const BucketKey& bucket() const { return key.first; }
    // "f32 bucket ..." or "refinement of f32 40x48x56 in f32 bucket ...".
    std::string What() const;
  };
  class Hooks;
  // Why a candidate eligible but not raced appears unmeasured.
  using NotRaced = std::function<std::string(const RegisteredCandidate&)>;

  // Admits a new job for `key` (`mu_` held): RESOURCE_EXHAUSTED past a limit.
  absl::StatusOr<std::shared_ptr<Job>> NewJob(const JobKey& key, const Problem& p,
                                              const std::string& peer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Joins (or admits) `key`'s job and waits for it while `caller` waits.
  absl::StatusOr<Verdict> Await(const JobKey& key, const Problem& p, bool refinement,
                                const CallContext& caller, const MeasureCall& call);
  // The next job to run: the first but a background refinement nobody waits for,
  // else the first (`mu_` held; the queue is not empty).
  std::shared_ptr<Job> NextJob() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `job` off the books (queue, entries, peer count) and wakes its waiters.
  void Finish(const std::shared_ptr<Job>& job, absl::StatusOr<Verdict> result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A waiter left: drops the entry when nobody waits for it any more and it is not background.
  void Forsake(const std::shared_ptr<Job>& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Dropped(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<Verdict> MeasureBucket(const std::shared_ptr<Job>& job);
  // A refinement job: RefineShape, or MeasureBucket where there is nothing to refine.
  absl::StatusOr<Verdict> RunRefinement(const std::shared_ptr<Job>& job);
  // EnqueueRefinement's queueing: false when the refinement was not queued.
  bool QueueRefinement(const Problem& p);
  absl::StatusOr<Verdict> RefineShape(const std::shared_ptr<Job>& job, const Verdict& bucket,
                                      const std::vector<const RegisteredCandidate*>& eligible);
  // Splits `bucket` where `raced` (the refinement's race at the job's shape,
  // decided against the bucket's winner) disagrees with it, if a half-octave
  // separates them: the other half takes `raced`'s figures, raced again nowhere.
  absl::Status Split(const std::shared_ptr<Job>& job, const Verdict& bucket, const Verdict& raced);
  // Races `racers` (some of `eligible`) at the job's shape on a leased stream,
  // with the journal, watchdog and checkpoints, under `measure`, and decides
  // against `incumbent` (on the race's paired samples, selection.h) - after more
  // rounds of the two where the race against it is close (UnsettledPair, within
  // measure's device budget; the reason says so); every other
  // eligible candidate is listed unmeasured with `not_raced`'s reason. `samples`
  // (may be null) receives the race's samples, for a caller that decides again on
  // them. A close race against `incumbent` gets more rounds (UnsettledPair); in a
  // `refinement`, whose shape is served by its fastest with no incumbent, so does
  // one between the fastest and the runner-up (UnsettledPick).
  // Quarantines disproved claims; stores nothing. UNAVAILABLE after a fault.
  absl::StatusOr<Verdict> RaceAt(const std::shared_ptr<Job>& job,
                                 const std::vector<const RegisteredCandidate*>& eligible,
                                 const std::vector<const RegisteredCandidate*>& racers,
                                 const std::optional<std::string>& incumbent,
                                 const NotRaced& not_raced, const MeasureOptions& measure,
                                 RaceSamples* samples = nullptr, bool refinement = false);
  // Puts the bucket's verdicts, as the store now holds them, in the cache.
  absl::Status Recache(const BucketKey& key);
  // Caches `v` as `key`'s verdict, with the refinements and halves the store
  // holds beside it when `v` is the store's own.
  void CacheBucket(const BucketKey& key, const Verdict& v);
  static void Log(const Verdict& v);
  // The served verdict for `p` when it raced exactly the candidates eligible now.
  std::optional<Verdict> FreshVerdict(const Problem& p);
  // Takes the fleet's lease on `scope` of `job`'s bucket, waiting while another
  // daemon holds it and someone here waits for the job (ABORTED at once for a
  // background-only job; CANCELLED once it is dropped); sets `theirs` instead when
  // `fresh` finds that daemon's verdict meanwhile. A null lease with no `theirs`:
  // the store cannot grant leases (measure alone).
  absl::StatusOr<std::unique_ptr<StoreLease>> TakeLease(
      const std::shared_ptr<Job>& job, const VerdictScope& scope,
      const std::function<std::optional<Verdict>()>& fresh, std::optional<Verdict>* theirs);
  // The verdict this daemon serves for `key` from the store or its own set-aside
  // verdicts; nullopt when there is none (or the store cannot answer).
  std::optional<Verdict> Current(const BucketKey& key);
  // Writes pending verdicts to the store; stops at the first it cannot reach.
  void WriteBack();
  void MeasuringLoop();
  void WatchdogLoop();
  // A hang or device fault: records `cause` in the journal and reports it (once).
  void Fault(const absl::Status& status, const std::string& cause);

  const TunerOptions options_;
  Backend& backend_;
  const Registry& registry_;
  VerdictStore& store_;
  NodeVerdicts& node_verdicts_;
  StreamPool& streams_;
  Quarantine& quarantine_;
  VerdictCache& cache_;
  IntentJournal* const journal_;
  const std::string fingerprint_;
  ArbiterObserver* observer_ = nullptr;
  std::atomic<int64_t> measurements_{0};
  std::atomic<bool> faulted_{false};

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // an entry finished, work arrived, or shutdown began
  std::map<JobKey, std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);  // queued or running
  std::deque<std::shared_ptr<Job>> queue_ ABSL_GUARDED_BY(mu_);
  size_t charged_ ABSL_GUARDED_BY(mu_) = 0;      // jobs counted against max_queued
  size_t refinements_ ABSL_GUARDED_BY(mu_) = 0;  // jobs counted against max_queued_refinements
  std::map<std::string, size_t> per_peer_ ABSL_GUARDED_BY(mu_);  // entries charged to a peer
  std::shared_ptr<Job> running_ ABSL_GUARDED_BY(mu_);
  std::map<BucketKey, Verdict> pending_ ABSL_GUARDED_BY(mu_);  // measured, the store was down
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // The watchdog's view: which candidate runs since when, and the last sign of progress.
  absl::Mutex watch_mu_;
  std::optional<Intent> watched_ ABSL_GUARDED_BY(watch_mu_);
  std::chrono::steady_clock::time_point progress_ ABSL_GUARDED_BY(watch_mu_);
  bool watch_stop_ ABSL_GUARDED_BY(watch_mu_) = false;

  std::thread measuring_;  // last: start once everything above is built
  std::thread watchdog_;
};

}  // namespace arbiter
