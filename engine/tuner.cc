#include "engine/tuner.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/selection_policy.h"
#include "spdlog/spdlog.h"

namespace arbiter {

namespace {

using Clock = std::chrono::steady_clock;

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status ShuttingDown(const BucketKey& key) {
  return absl::UnavailableError(
      absl::StrCat("arbiterd is shutting down: ", key.ToString(), " is not measured"));
}

}  // namespace

// One bucket to measure, however many callers asked for it.
struct Tuner::Job {
  Problem problem;   // the shape measured: the first caller's
  BucketKey key;
  std::string peer;  // charged for it (empty: nobody)
  int waiters = 0;           // synchronous callers waiting for its verdict
  bool background = false;   // measured even if nobody waits
  bool remeasure = false;    // measured even over a fresh verdict (an operator's tune)
  bool running = false;
  bool done = false;
  bool drop = false;         // nobody wants it any more: stop at the next checkpoint
  bool stopped = false;      // it was stopped because of `drop` or shutdown
  absl::StatusOr<Verdict> result = absl::UnknownError("not measured yet");
};

// The measurer's hooks for one measurement: journal and watchdog before each
// launch; health, drop and yielding the stream at each checkpoint.
class Tuner::Hooks final : public MeasureHooks {
 public:
  Hooks(Tuner& tuner, std::shared_ptr<Job> job, StreamPool::Lease& lease, CallContext context)
      : tuner_(tuner), job_(std::move(job)), lease_(lease), context_(std::move(context)) {}

  void Launching(const CandidateSpec& candidate, std::string_view phase) override {
    Intent intent{candidate.name, candidate.version, job_->problem, std::string(phase), "",
                  static_cast<int64_t>(::getpid()), NowUnix()};
    if (tuner_.journal_ != nullptr && !(last_ && last_->candidate == intent.candidate &&
                                        last_->phase == intent.phase)) {
      if (absl::Status s = tuner_.journal_->Record(intent); !s.ok()) {
        spdlog::warn("tuning intent not recorded: {}", s.ToString());
      }
    }
    last_ = intent;
    absl::MutexLock lock(&tuner_.watch_mu_);
    tuner_.watched_ = std::move(intent);
    tuner_.progress_ = Clock::now();
  }

  absl::Status Checkpoint() override {
    std::optional<Intent> watched;
    {
      absl::MutexLock lock(&tuner_.watch_mu_);
      tuner_.progress_ = Clock::now();
      // Not watched while lending the stream: waiting for dispatches is not a hang.
      watched = std::exchange(tuner_.watched_, std::nullopt);
    }
    absl::Status s = Step();
    absl::MutexLock lock(&tuner_.watch_mu_);
    tuner_.watched_ = std::move(watched);
    tuner_.progress_ = Clock::now();
    return s;
  }

  // The measurement ended (however): nothing of it runs any more.
  void Finished() {
    absl::MutexLock lock(&tuner_.watch_mu_);
    tuner_.watched_.reset();
  }
  const std::optional<Intent>& last() const { return last_; }

 private:
  absl::Status Step() {
    if (absl::Status health = tuner_.backend_.Health(); !health.ok()) {
      tuner_.Fault(health, absl::StrCat("device fault: ", health.message()));
      return absl::UnavailableError(absl::StrCat("device fault while measuring ",
                                                 job_->key.ToString(), ": ", health.message()));
    }
    {
      absl::MutexLock lock(&tuner_.mu_);
      if (tuner_.Dropped(*job_)) {
        job_->stopped = true;
        return absl::CancelledError(absl::StrCat(
            "measurement of ", job_->key.ToString(), " stopped: ",
            tuner_.stopping_ ? "arbiterd is shutting down" : "nobody waits for it any more"));
      }
    }
    return tuner_.streams_.Yield(lease_, context_);
  }

  Tuner& tuner_;
  const std::shared_ptr<Job> job_;
  StreamPool::Lease& lease_;
  const CallContext context_;
  std::optional<Intent> last_;
};

Tuner::Tuner(const TunerOptions& options, Backend& backend, const Registry& registry,
             VerdictStore& store, NodeVerdicts& node_verdicts, StreamPool& streams,
             Quarantine& quarantine, VerdictCache& cache, IntentJournal* journal)
    : options_(options),
      backend_(backend),
      registry_(registry),
      store_(store),
      node_verdicts_(node_verdicts),
      streams_(streams),
      quarantine_(quarantine),
      cache_(cache),
      journal_(journal),
      fingerprint_(backend.info().Fingerprint()) {
  measuring_ = std::thread([this] { MeasuringLoop(); });
  watchdog_ = std::thread([this] { WatchdogLoop(); });
}

Tuner::~Tuner() {
  Shutdown();
  if (measuring_.joinable()) measuring_.join();
  {
    absl::MutexLock lock(&watch_mu_);
    watch_stop_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
}

bool Tuner::Dropped(const Job& job) { return stopping_ || job.drop; }

absl::StatusOr<std::shared_ptr<Tuner::Job>> Tuner::NewJob(const Problem& p,
                                                          const std::string& peer) {
  const BucketKey key = BucketKeyOf(p);
  if (jobs_.size() >= options_.max_queued) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tuning queue full: ", jobs_.size(), " buckets queued or being measured (limit ",
                     options_.max_queued, "); ", key.ToString(), " is not measured"));
  }
  if (!peer.empty()) {
    auto it = per_peer_.find(peer);
    if (it != per_peer_.end() && it->second >= options_.max_queued_per_peer) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "peer ", peer, " already has ", it->second, " buckets queued for measurement (limit ",
          options_.max_queued_per_peer, "); ", key.ToString(), " is not measured"));
    }
    ++per_peer_[peer];
  }
  auto job = std::make_shared<Job>();
  job->problem = p;
  job->key = key;
  job->peer = peer;
  jobs_[key] = job;
  queue_.push_back(job);
  changed_.SignalAll();
  return job;
}

void Tuner::Finish(const std::shared_ptr<Job>& job, absl::StatusOr<Verdict> result) {
  job->done = true;
  job->running = false;
  job->result = std::move(result);
  if (auto it = jobs_.find(job->key); it != jobs_.end() && it->second == job) jobs_.erase(it);
  std::erase(queue_, job);
  if (!job->peer.empty()) {
    if (auto it = per_peer_.find(job->peer); it != per_peer_.end() && --it->second == 0) {
      per_peer_.erase(it);
    }
  }
  if (running_ == job) running_.reset();
  changed_.SignalAll();
}

void Tuner::Forsake(const std::shared_ptr<Job>& job) {
  if (job->waiters > 0 || job->background || job->done) return;
  if (!job->running) {
    spdlog::info("measurement of {} dropped before it started: nobody waits for it any more",
                 job->key.ToString());
    Finish(job, absl::CancelledError(absl::StrCat("nobody waits for the measurement of ",
                                                  job->key.ToString(), " any more")));
    return;
  }
  job->drop = true;  // the measuring thread stops at its next checkpoint
}

absl::StatusOr<Verdict> Tuner::MeasureOnce(const Problem& p, const CallContext& caller,
                                           const MeasureCall& call) {
  const BucketKey key = BucketKeyOf(p);
  const std::string what = absl::StrCat("while waiting for the measurement of ", key.ToString());
  absl::MutexLock lock(&mu_);
  if (stopping_) return ShuttingDown(key);
  std::shared_ptr<Job> job;
  if (auto it = jobs_.find(key); it != jobs_.end()) {
    job = it->second;
    job->drop = false;  // wanted again
  } else {
    ASSIGN_OR_RETURN(job, NewJob(p, caller.peer));
  }
  if (!job->running) job->remeasure |= call.remeasure;
  ++job->waiters;
  while (!job->done) {
    if (absl::Status s = caller.StillWaiting(what.c_str()); !s.ok()) {
      --job->waiters;
      Forsake(job);
      return s;
    }
    changed_.WaitWithDeadline(&mu_, caller.WakeBy());
  }
  --job->waiters;
  return job->result;
}

absl::Status Tuner::Enqueue(const Problem& p, const std::string& peer) {
  const BucketKey key = BucketKeyOf(p);
  absl::MutexLock lock(&mu_);
  if (stopping_) return ShuttingDown(key);
  if (auto it = jobs_.find(key); it != jobs_.end()) {
    it->second->background = true;
    it->second->drop = false;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Job> job, NewJob(p, peer));
  job->background = true;
  return absl::OkStatus();
}

void Tuner::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  stopping_ = true;
  const std::deque<std::shared_ptr<Job>> queued = queue_;
  for (const std::shared_ptr<Job>& job : queued) Finish(job, ShuttingDown(job->key));
  if (!queued.empty()) spdlog::info("shutdown: {} queued measurements dropped", queued.size());
  changed_.SignalAll();  // the running measurement stops at its next checkpoint
}

bool Tuner::WaitStopped(Clock::time_point deadline) {
  absl::MutexLock lock(&mu_);
  const absl::Time until = absl::Now() + absl::FromChrono(deadline - Clock::now());
  while (running_ != nullptr) {
    if (changed_.WaitWithDeadline(&mu_, until) && running_ != nullptr) return false;
  }
  return true;
}

void Tuner::Abandon() {
  if (journal_ == nullptr) return;
  if (absl::Status s = journal_->Clear(); !s.ok()) {
    spdlog::warn("tuning intent not cleared: {}", s.ToString());
  }
}

void Tuner::WaitIdle() {
  absl::MutexLock lock(&mu_);
  while (!stopping_ && !(queue_.empty() && running_ == nullptr)) changed_.Wait(&mu_);
}

size_t Tuner::queued() const {
  absl::MutexLock lock(&mu_);
  return jobs_.size();
}

std::optional<Verdict> Tuner::Pending(const BucketKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(key);
  if (it == pending_.end()) return std::nullopt;
  return it->second;
}

size_t Tuner::pending_writes() {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

void Tuner::WriteBack() {
  std::map<BucketKey, Verdict> pending;
  {
    absl::MutexLock lock(&mu_);
    if (pending_.empty()) return;
    pending = pending_;
  }
  for (const auto& [key, v] : pending) {
    // Another daemon's verdict for the bucket, stored meanwhile, stands.
    absl::StatusOr<Verdict> stored = store_.GetVerdict(fingerprint_, key.dtype, key.bucket);
    absl::Status written = stored.ok() ? absl::OkStatus() : stored.status();
    if (absl::IsNotFound(written)) written = store_.PutVerdict(v);
    if (absl::IsUnavailable(written)) return;  // still down: try again later
    if (!written.ok()) {
      spdlog::warn("verdict of {} measured while the store was down is dropped: {}",
                   key.ToString(), written.ToString());
    } else if (stored.ok()) {
      spdlog::info("verdict of {} measured while the store was down: the store's stands",
                   key.ToString());
    } else {
      spdlog::info("verdict of {} measured while the store was down written back",
                   key.ToString());
    }
    absl::MutexLock lock(&mu_);
    if (auto it = pending_.find(key); it != pending_.end() && it->second.created_unix == v.created_unix) {
      pending_.erase(it);
    }
  }
}

std::optional<Verdict> Tuner::Current(const BucketKey& key) {
  if (std::optional<Verdict> mine = Pending(key)) return mine;
  absl::StatusOr<Verdict> stored = store_.GetVerdict(fingerprint_, key.dtype, key.bucket);
  if (!node_verdicts_.empty() && node_verdicts_.SetAside(key, stored.ok() ? &*stored : nullptr)) {
    return node_verdicts_.Get(key);
  }
  if (!stored.ok()) return std::nullopt;
  return *std::move(stored);
}

std::optional<Verdict> Tuner::FreshVerdict(const Problem& p) {
  std::optional<Verdict> v = Current(BucketKeyOf(p));
  if (!v || v->candidates != RacedSet(Eligible(registry_, quarantine_, p, nullptr))) {
    return std::nullopt;
  }
  return v;
}

bool Tuner::HasFreshVerdict(const Problem& p) { return FreshVerdict(p).has_value(); }

void Tuner::OnVerdictsChanged() {
  absl::MutexLock lock(&mu_);
  changed_.SignalAll();
}

absl::StatusOr<std::unique_ptr<StoreLease>> Tuner::TakeLease(const std::shared_ptr<Job>& job,
                                                             std::optional<Verdict>* theirs) {
  const Problem& p = job->problem;
  const BucketKey& key = job->key;
  bool told = false;
  while (true) {
    absl::StatusOr<std::unique_ptr<StoreLease>> lease =
        store_.TryLease(fingerprint_, key.dtype, key.bucket);
    if (!lease.ok()) {
      spdlog::warn("measuring {} without the fleet's lease: {}", key.ToString(),
                   lease.status().ToString());
      return nullptr;
    }
    if (*lease != nullptr) return lease;
    // Another daemon measures this bucket: its verdict is what this one would store.
    {
      absl::MutexLock lock(&mu_);
      if (Dropped(*job)) {
        job->stopped = true;
        return absl::CancelledError(absl::StrCat(
            "measurement of ", key.ToString(), " stopped while another daemon measured it: ",
            stopping_ ? "arbiterd is shutting down" : "nobody waits for it any more"));
      }
      if (job->waiters == 0) {
        // Background tuning: the holder's verdict will reach the store.
        return absl::AbortedError(
            absl::StrCat(key.ToString(), " is being measured by another daemon"));
      }
    }
    if (!told) {
      spdlog::info("{} is being measured by another daemon; waiting for its verdict",
                   key.ToString());
      if (observer_) observer_->OnLeaseWait(p);
      told = true;
    }
    if (std::optional<Verdict> v = FreshVerdict(p)) {
      *theirs = std::move(v);
      return nullptr;
    }
    absl::MutexLock lock(&mu_);
    if (Dropped(*job)) continue;  // said at the top of the loop
    changed_.WaitWithTimeout(&mu_, absl::FromChrono(options_.lease_poll));
  }
}

void Tuner::MeasuringLoop() {
  while (true) {
    std::shared_ptr<Job> job;
    bool background_only = false;
    {
      absl::MutexLock lock(&mu_);
      // Verdicts waiting for the store are retried each second, or at once on a
      // notification (the store is back).
      while (!stopping_ && queue_.empty()) {
        if (pending_.empty()) {
          changed_.Wait(&mu_);
        } else {
          changed_.WaitWithTimeout(&mu_, absl::Seconds(1));
          break;
        }
      }
      if (stopping_) return;
      if (!queue_.empty()) {
        job = queue_.front();
        queue_.pop_front();
        job->running = true;
        job->stopped = false;
        running_ = job;
        background_only = job->waiters == 0;
      }
    }
    WriteBack();
    if (job == nullptr) continue;
    absl::StatusOr<Verdict> result;
    // A background entry for a bucket measured meanwhile (e.g. by an operator's tune).
    std::optional<Verdict> fresh =
        background_only && !job->remeasure ? FreshVerdict(job->problem) : std::nullopt;
    if (fresh) {
      result = *std::move(fresh);
    } else {
      result = MeasureBucket(job);
    }
    absl::MutexLock lock(&mu_);
    if (job->stopped && !stopping_ && (job->waiters > 0 || job->background)) {
      // Dropped, then wanted again before the drop took effect: measure it afresh.
      job->running = false;
      job->drop = false;
      running_.reset();
      queue_.push_front(job);
      continue;
    }
    if (job->stopped && stopping_) result = ShuttingDown(job->key);
    if (absl::IsAborted(result.status())) {
      spdlog::debug("background tuning of {} left to another daemon", job->problem.ToString());
    } else if (!result.ok() && !job->stopped && job->background) {
      spdlog::warn("background tuning of {} failed: {}", job->problem.ToString(),
                   result.status().ToString());
    }
    Finish(job, std::move(result));
  }
}

void Tuner::WatchdogLoop() {
  const auto hang = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.hang_seconds));
  absl::MutexLock lock(&watch_mu_);
  while (!watch_stop_) {
    if (watched_ && !faulted_.load()) {
      const Clock::time_point due = progress_ + hang;
      if (Clock::now() >= due) {
        const Intent hung = *watched_;
        const std::string cause = absl::StrFormat(
            "hung: no progress for %gs in its %s phase on %s (watchdog, --tuning-hang-seconds)",
            options_.hang_seconds, hung.phase, hung.problem.ToString());
        watch_mu_.Unlock();
        Fault(absl::DeadlineExceededError(absl::StrCat("candidate ", hung.candidate, "@v",
                                                       hung.version, " ", cause)),
              cause);
        watch_mu_.Lock();
        continue;
      }
      watch_mu_.AwaitWithDeadline(absl::Condition(&watch_stop_), absl::FromChrono(
          std::chrono::system_clock::now() + (due - Clock::now())));
    } else {
      // Re-read at least once a second: a measurement that starts does not signal.
      watch_mu_.AwaitWithTimeout(absl::Condition(&watch_stop_), absl::Seconds(1));
    }
  }
}

void Tuner::Fault(const absl::Status& status, const std::string& cause) {
  if (faulted_.exchange(true)) return;
  spdlog::critical("candidate fault while measuring: {}", status.ToString());
  if (journal_ != nullptr) {
    if (absl::Status s = journal_->SetCause(cause); !s.ok()) {
      spdlog::error("tuning intent cause not recorded: {}", s.ToString());
    }
  }
  if (options_.on_fault) options_.on_fault(status);
}

absl::StatusOr<Verdict> Tuner::MeasureBucket(const std::shared_ptr<Job>& job) {
  const Problem& p = job->problem;
  const auto t0 = std::chrono::steady_clock::now();
  std::string why_none;
  const std::vector<const RegisteredCandidate*> eligible =
      Eligible(registry_, quarantine_, p, &why_none);
  if (eligible.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate can run ", p.ToString(), ": ", why_none));
  }
  const Bucket bucket = BucketOf(p);
  const BucketKey key{p.dtype, bucket};
  absl::StatusOr<Verdict> prev = store_.GetVerdict(fingerprint_, p.dtype, bucket);
  const bool set_aside =
      !node_verdicts_.empty() && node_verdicts_.SetAside(key, prev.ok() ? &*prev : nullptr);
  // One measurer per bucket in the fleet (a bucket set aside is this daemon's alone).
  std::unique_ptr<StoreLease> lease;
  if (store_.shared() && !set_aside) {
    std::optional<Verdict> theirs;
    ASSIGN_OR_RETURN(lease, TakeLease(job, &theirs));
    if (!theirs && lease != nullptr && !job->remeasure) theirs = FreshVerdict(p);
    if (theirs) {
      spdlog::info("{} measured by another daemon: {}@v{}", key.ToString(), theirs->winner,
                   theirs->winner_version);
      cache_.Put(key, *theirs);
      return *std::move(theirs);
    }
    prev = store_.GetVerdict(fingerprint_, p.dtype, bucket);  // the holder may have replaced it
  }
  // The incumbent is the previous winner for this bucket, stale or not.
  std::optional<std::string> incumbent;
  if (set_aside) prev = absl::NotFoundError("set aside");
  if (std::optional<Verdict> own = set_aside ? node_verdicts_.Get(key) : std::nullopt) prev = *own;
  if (prev.ok() && !prev->winner.empty()) incumbent = prev->winner;
  // Measure the highest tiers first: a fast early median lets hopeless candidates stop early.
  std::vector<const RegisteredCandidate*> order = eligible;
  std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) {
    return x->spec.tier > y->spec.tier;
  });
  spdlog::info("measuring {} (bucket {}) over {} candidates", p.ToString(), bucket.ToString(),
               order.size());
  // The measurement stops when dropped (nobody waits) or at shutdown.
  CallContext context;
  context.cancelled = [this, job] {
    absl::MutexLock lock(&mu_);
    if (!Dropped(*job)) return false;
    job->stopped = true;
    return true;
  };
  MeasureReport report;
  {
    ASSIGN_OR_RETURN(StreamPool::Lease stream, streams_.Acquire(/*bounded=*/false, context));
    Hooks hooks(*this, job, stream, context);
    Measurer measurer(backend_, *stream, options_.measure, &hooks);
    absl::StatusOr<MeasureReport> m = measurer.Race(p, order);
    hooks.Finished();
    // A fault in the last candidate's runs shows here, with the journal still naming it.
    if (absl::Status health = backend_.Health(); !health.ok() && hooks.last()) {
      Fault(health, absl::StrCat("device fault: ", health.message()));
    }
    if (faulted_.load()) {
      return absl::UnavailableError(absl::StrCat(
          "a candidate faulted the device while measuring ", p.ToString(),
          "; arbiterd stops so its supervisor restarts it"));
    }
    if (journal_ != nullptr) {
      if (absl::Status s = journal_->Clear(); !s.ok()) {
        spdlog::warn("tuning intent not cleared: {}", s.ToString());
      }
    }
    if (!m.ok()) {
      spdlog::info("measurement of {} ended without a verdict: {}", p.ToString(),
                   m.status().ToString());
      return m.status();
    }
    report = *std::move(m);
  }
  ++measurements_;
  std::vector<Measurement>& measured = report.measurements;

  Verdict v;
  v.fingerprint = fingerprint_;
  v.dtype = p.dtype;
  v.bucket = bucket;
  v.candidates = RacedSet(eligible);
  v.measured = p;
  v.cost = report.cost;
  v.sm_clock_min_mhz = report.sm_clock_min_mhz;
  v.sm_clock_max_mhz = report.sm_clock_max_mhz;
  v.created_unix = NowUnix();
  // Results in registration order, so the tier default's tie-break is stable.
  for (const RegisteredCandidate* c : eligible) {
    for (Measurement& m : measured) {
      if (m.result.name != c->spec.name) continue;
      if (m.claim_violation) {
        const QuarantineScope scope = QuarantineScope::OfDType(p.dtype);
        spdlog::warn("quarantining {}@v{} for {}: {}", c->spec.name, c->spec.version,
                     scope.ToString(), m.result.reason);
        RETURN_IF_ERROR(quarantine_.Add(c->spec.name, c->spec.version, scope, m.result.reason));
      }
      v.results.push_back(m.result);
    }
  }
  const Decision d = Decide(v.results, Determinism::kNondeterministic, incumbent, options_.noise);
  v.winner = d.winner;
  v.winner_version = d.winner_version;
  v.source = VerdictSource::kMeasured;
  v.reason = d.reason;
  if (set_aside) {
    node_verdicts_.Put(v);
  } else if (absl::Status put = store_.PutVerdict(v); !put.ok()) {
    if (!absl::IsUnavailable(put)) return put;
    spdlog::warn("verdict of {} kept here until the store returns: {}", key.ToString(),
                 put.ToString());
    absl::MutexLock lock(&mu_);
    pending_[key] = v;
    changed_.SignalAll();
  }
  cache_.Put(key, v);
  {
    std::ostringstream os;
    os << v << "; measuring took " << v.cost;
    spdlog::info("verdict {}", os.str());
    for (const CandidateResult& r : v.results) {
      std::ostringstream rs;
      rs << r;
      spdlog::info("  {}", rs.str());
    }
  }
  if (observer_) {
    observer_->OnTuning(
        p, v, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (v.winner.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate passed the oracle for ", p.ToString(), ": ", d.reason));
  }
  return v;
}

}  // namespace arbiter
