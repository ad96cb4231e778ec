#include "engine/tuner.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/refinement.h"
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

absl::Status ShuttingDown(const std::string& what) {
  return absl::UnavailableError(absl::StrCat("arbiterd is shutting down: ", what, " is not measured"));
}

}  // namespace

std::string Tuner::Job::What() const {
  if (!refinement) return bucket().ToString();
  return absl::StrCat("refinement of ", problem.ToString(), " in ", bucket().ToString());
}

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
                                                 job_->What(), ": ", health.message()));
    }
    {
      absl::MutexLock lock(&tuner_.mu_);
      if (tuner_.Dropped(*job_)) {
        job_->stopped = true;
        return absl::CancelledError(absl::StrCat(
            "measurement of ", job_->What(), " stopped: ",
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

absl::StatusOr<std::shared_ptr<Tuner::Job>> Tuner::NewJob(const JobKey& key, const Problem& p,
                                                          const std::string& peer) {
  const std::string what = key.second.empty()
                               ? key.first.ToString()
                               : absl::StrCat("refinement of ", p.ToString(), " in ", key.first.ToString());
  if (charged_ >= options_.max_queued) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tuning queue full: ", charged_, " measurements queued or running (limit ",
                     options_.max_queued, "); ", what, " is not measured"));
  }
  if (!peer.empty()) {
    auto it = per_peer_.find(peer);
    if (it != per_peer_.end() && it->second >= options_.max_queued_per_peer) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "peer ", peer, " already has ", it->second, " measurements queued (limit ",
          options_.max_queued_per_peer, "); ", what, " is not measured"));
    }
    ++per_peer_[peer];
  }
  auto job = std::make_shared<Job>();
  job->problem = p;
  job->key = key;
  job->refinement = !key.second.empty();
  job->peer = peer;
  ++charged_;
  jobs_[key] = job;
  queue_.push_back(job);
  changed_.SignalAll();
  return job;
}

std::shared_ptr<Tuner::Job> Tuner::NextJob() {
  auto it = std::find_if(queue_.begin(), queue_.end(), [](const std::shared_ptr<Job>& job) {
    return !(job->refinement && job->waiters == 0);
  });
  if (it == queue_.end()) it = queue_.begin();
  std::shared_ptr<Job> job = *it;
  queue_.erase(it);
  return job;
}

void Tuner::Finish(const std::shared_ptr<Job>& job, absl::StatusOr<Verdict> result) {
  job->done = true;
  job->running = false;
  job->result = std::move(result);
  if (auto it = jobs_.find(job->key); it != jobs_.end() && it->second == job) {
    jobs_.erase(it);
    --(job->refinement_slot ? refinements_ : charged_);
  }
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
                 job->What());
    Finish(job, absl::CancelledError(absl::StrCat("nobody waits for the measurement of ",
                                                  job->What(), " any more")));
    return;
  }
  job->drop = true;  // the measuring thread stops at its next checkpoint
}

absl::StatusOr<Verdict> Tuner::MeasureOnce(const Problem& p, const CallContext& caller,
                                           const MeasureCall& call) {
  return Await(JobKey{BucketKeyOf(p), ""}, p, /*refinement=*/false, caller, call);
}

absl::StatusOr<Verdict> Tuner::Refine(const Problem& p, const CallContext& caller,
                                      const MeasureCall& call) {
  const BucketKey key = BucketKeyOf(p);
  if (!node_verdicts_.empty()) {
    // A bucket set aside for this node is measured and kept here alone, whole.
    absl::StatusOr<Verdict> stored = store_.GetVerdict(fingerprint_, key.dtype, key.bucket);
    if (node_verdicts_.SetAside(key, stored.ok() ? &*stored : nullptr)) {
      return MeasureOnce(p, caller, call);
    }
  }
  absl::StatusOr<std::optional<Verdict>> bucket = LoadBucket(key);
  const std::vector<const RegisteredCandidate*> eligible =
      Eligible(registry_, quarantine_, p, nullptr);
  // Nothing fresh to refine (or the store cannot say), or `p` is where the bucket
  // was measured: measure the bucket.
  if (!bucket.ok() || !*bucket || (*bucket)->candidates != RacedSet(eligible) ||
      (*bucket)->measured == p || (*bucket)->winner.empty()) {
    return MeasureOnce(p, caller, call);
  }
  return Await(JobKey{key, VerdictScope::Shape(p).ToString()}, p, /*refinement=*/true, caller,
               call);
}

absl::StatusOr<Verdict> Tuner::Await(const JobKey& key, const Problem& p, bool refinement,
                                     const CallContext& caller, const MeasureCall& call) {
  const std::string what =
      absl::StrCat("while waiting for the measurement of ",
                   refinement ? absl::StrCat("refinement of ", p.ToString(), " in ",
                                             key.first.ToString())
                              : key.first.ToString());
  absl::MutexLock lock(&mu_);
  if (stopping_) return ShuttingDown(key.first.ToString());
  std::shared_ptr<Job> job;
  if (auto it = jobs_.find(key); it != jobs_.end()) {
    job = it->second;
    job->drop = false;  // wanted again
  } else {
    ASSIGN_OR_RETURN(job, NewJob(key, p, caller.peer));
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
  const JobKey key{BucketKeyOf(p), ""};
  absl::MutexLock lock(&mu_);
  if (stopping_) return ShuttingDown(key.first.ToString());
  if (auto it = jobs_.find(key); it != jobs_.end()) {
    it->second->background = true;
    it->second->drop = false;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Job> job, NewJob(key, p, peer));
  job->background = true;
  return absl::OkStatus();
}

void Tuner::EnqueueRefinement(const Problem& p) {
  if (!QueueRefinement(p) && options_.on_refinement_lost) options_.on_refinement_lost(p);
}

bool Tuner::QueueRefinement(const Problem& p) {
  const JobKey key{BucketKeyOf(p), VerdictScope::Shape(p).ToString()};
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  if (auto it = jobs_.find(key); it != jobs_.end()) {
    it->second->background = true;
    it->second->drop = false;
    return true;
  }
  if (refinements_ >= options_.max_queued_refinements) {
    spdlog::debug("refinement of {} not queued: {} refinements queued (limit {})", p.ToString(),
                  refinements_, options_.max_queued_refinements);
    return false;
  }
  auto job = std::make_shared<Job>();
  job->problem = p;
  job->key = key;
  job->refinement = true;
  job->refinement_slot = true;
  job->background = true;
  ++refinements_;
  jobs_[key] = job;
  queue_.push_back(job);
  changed_.SignalAll();
  return true;
}

void Tuner::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  stopping_ = true;
  const std::deque<std::shared_ptr<Job>> queued = queue_;
  for (const std::shared_ptr<Job>& job : queued) Finish(job, ShuttingDown(job->What()));
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

void Tuner::OnVerdictsChanged() {
  absl::MutexLock lock(&mu_);
  changed_.SignalAll();
}

absl::StatusOr<std::unique_ptr<StoreLease>> Tuner::TakeLease(
    const std::shared_ptr<Job>& job, const VerdictScope& scope,
    const std::function<std::optional<Verdict>()>& fresh, std::optional<Verdict>* theirs) {
  const Problem& p = job->problem;
  const BucketKey& key = job->bucket();
  const std::string what = scope.whole() ? key.ToString()
                                         : absl::StrCat(scope.ToString(), " of ", key.ToString());
  bool told = false;
  while (true) {
    absl::StatusOr<std::unique_ptr<StoreLease>> lease =
        store_.TryLease(fingerprint_, key.dtype, key.bucket, scope);
    if (!lease.ok()) {
      spdlog::warn("measuring {} without the fleet's lease: {}", what, lease.status().ToString());
      return nullptr;
    }
    if (*lease != nullptr) return lease;
    // Another daemon measures this bucket: its verdict is what this one would store.
    {
      absl::MutexLock lock(&mu_);
      if (Dropped(*job)) {
        job->stopped = true;
        return absl::CancelledError(absl::StrCat(
            "measurement of ", what, " stopped while another daemon measured it: ",
            stopping_ ? "arbiterd is shutting down" : "nobody waits for it any more"));
      }
      if (job->waiters == 0) {
        // Background tuning: the holder's verdict will reach the store.
        return absl::AbortedError(absl::StrCat(what, " is being measured by another daemon"));
      }
    }
    if (!told) {
      spdlog::info("{} is being measured by another daemon; waiting for its verdict", what);
      if (observer_) observer_->OnLeaseWait(p);
      told = true;
    }
    if (std::optional<Verdict> v = fresh()) {
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
        job = NextJob();
        job->running = true;
        job->stopped = false;
        running_ = job;
      }
    }
    WriteBack();
    if (job == nullptr) continue;
    absl::StatusOr<Verdict> result;
    // A bucket measured meanwhile (by an operator's tune, or by the job that finished just
    // after its caller found no verdict) is answered with that verdict, not measured again.
    std::optional<Verdict> fresh =
        !job->remeasure && !job->refinement ? FreshVerdict(job->problem) : std::nullopt;
    if (fresh) {
      result = *std::move(fresh);
    } else if (job->refinement) {
      result = RunRefinement(job);
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
    if (job->stopped && stopping_) result = ShuttingDown(job->What());
    if (absl::IsAborted(result.status())) {
      spdlog::debug("background tuning of {} left to another daemon", job->What());
    } else if (!result.ok() && !job->stopped && job->background) {
      spdlog::warn("background tuning of {} failed: {}", job->What(), result.status().ToString());
      // Told before the job is finished, so that whoever waits for the queue to empty
      // finds the shape free to become hot again.
      if (job->refinement && options_.on_refinement_lost) options_.on_refinement_lost(job->problem);
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

absl::StatusOr<std::optional<Verdict>> Tuner::LoadBucket(const BucketKey& key) {
  return LoadBucketVerdicts(store_, fingerprint_, key);
}

absl::Status Tuner::Recache(const BucketKey& key) {
  ASSIGN_OR_RETURN(std::optional<Verdict> v, LoadBucket(key));
  if (v) cache_.Put(key, *v);
  return absl::OkStatus();
}

void Tuner::CacheBucket(const BucketKey& key, const Verdict& v) {
  absl::StatusOr<std::optional<Verdict>> loaded = LoadBucket(key);
  if (loaded.ok() && *loaded && (*loaded)->created_unix == v.created_unix &&
      (*loaded)->measured == v.measured && (*loaded)->winner == v.winner &&
      (*loaded)->candidates == v.candidates) {
    cache_.Put(key, **loaded);
    return;
  }
  cache_.Put(key, v);
}

void Tuner::Log(const Verdict& v) {
  std::ostringstream os;
  os << v << "; measuring took " << v.cost;
  spdlog::info("verdict {}", os.str());
  for (const CandidateResult& r : v.results) {
    std::ostringstream rs;
    rs << r;
    spdlog::info("  {}", rs.str());
  }
}

absl::StatusOr<Verdict> Tuner::RaceAt(const std::shared_ptr<Job>& job,
                                      const std::vector<const RegisteredCandidate*>& eligible,
                                      const std::vector<const RegisteredCandidate*>& racers,
                                      const std::optional<std::string>& incumbent,
                                      const NotRaced& not_raced, const MeasureOptions& measure,
                                      RaceSamples* samples, bool refinement) {
  const Problem& p = job->problem;
  const auto t0 = std::chrono::steady_clock::now();
  // The highest tiers first: a fast early median lets hopeless candidates stop early.
  std::vector<const RegisteredCandidate*> order = racers;
  std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) {
    return x->spec.tier > y->spec.tier;
  });
  // The race stops when the job is dropped (nobody waits) or at shutdown.
  CallContext context;
  context.cancelled = [this, job] {
    absl::MutexLock lock(&mu_);
    if (!Dropped(*job)) return false;
    job->stopped = true;
    return true;
  };
  // A close race against the incumbent gets more rounds before it is decided
  // (MeasureOptions::extend; selection.h's UnsettledPair says which are close).
  MeasureOptions timed = measure;
  timed.extend = [&](const std::vector<Measurement>& ms, const RaceSamples& samples) {
    std::vector<CandidateResult> results;  // in registration order, as Decide gets them below
    for (const RegisteredCandidate* c : eligible) {
      for (const Measurement& m : ms) {
        if (m.result.name == c->spec.name) results.push_back(m.result);
      }
    }
    std::vector<std::string> close = UnsettledPair(results, Determinism::kNondeterministic,
                                                   incumbent, options_.noise, samples);
    if (refinement) {
      for (std::string& name :
           UnsettledPick(results, Determinism::kNondeterministic, options_.noise, samples)) {
        if (std::find(close.begin(), close.end(), name) == close.end()) close.push_back(name);
      }
    }
    return close;
  };
  MeasureReport report;
  {
    ASSIGN_OR_RETURN(StreamPool::Lease stream, streams_.Acquire(/*bounded=*/false, context));
    Hooks hooks(*this, job, stream, context);
    Measurer measurer(backend_, *stream, timed, &hooks);
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
      spdlog::info("measurement of {} ended without a verdict: {}", job->What(),
                   m.status().ToString());
      return m.status();
    }
    report = *std::move(m);
  }
  ++measurements_;

  Verdict v;
  v.fingerprint = fingerprint_;
  v.dtype = p.dtype;
  v.bucket = BucketOf(p);
  v.candidates = RacedSet(eligible);
  v.measured = p;
  v.cost = report.cost;
  v.sm_clock_min_mhz = report.sm_clock_min_mhz;
  v.sm_clock_max_mhz = report.sm_clock_max_mhz;
  v.created_unix = NowUnix();
  // Results in registration order, so the tier default's tie-break is stable.
  for (const RegisteredCandidate* c : eligible) {
    const Measurement* found = nullptr;
    for (const Measurement& m : report.measurements) {
      if (m.result.name == c->spec.name) found = &m;
    }
    if (found == nullptr) {
      CandidateResult r;
      r.name = c->spec.name;
      r.version = c->spec.version;
      r.tier = c->spec.tier;
      if (const CandidateMember* member = c->spec.Member(p.dtype)) {
        r.determinism = member->contract.determinism;
      }
      r.state = ResultState::kUnmeasured;
      r.reason = not_raced ? not_raced(*c) : "not raced";
      v.results.push_back(std::move(r));
      continue;
    }
    if (found->claim_violation) {
      const QuarantineScope scope = QuarantineScope::OfDType(p.dtype);
      spdlog::warn("quarantining {}@v{} for {}: {}", c->spec.name, c->spec.version,
                   scope.ToString(), found->result.reason);
      RETURN_IF_ERROR(quarantine_.Add(c->spec.name, c->spec.version, scope, found->result.reason));
    }
    v.results.push_back(found->result);
  }
  const Decision d = Decide(v.results, Determinism::kNondeterministic, incumbent, options_.noise,
                            &report.samples);
  v.winner = d.winner;
  v.winner_version = d.winner_version;
  v.source = VerdictSource::kMeasured;
  v.reason = d.reason;
  if (const std::string close = report.extension.ToString(); !close.empty()) {
    absl::StrAppend(&v.reason, "; close race: ", close);
  }
  if (v.sm_clock_max_mhz > 0) {
    // Kept in the reason, which every store persists, so the listing shows it.
    absl::StrAppend(&v.reason, absl::StrFormat("; SM clock %.0f-%.0f MHz while timing",
                                               v.sm_clock_min_mhz, v.sm_clock_max_mhz));
  }
  if (samples != nullptr) *samples = std::move(report.samples);
  if (observer_) {
    observer_->OnTuning(
        p, v, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return v;
}

absl::StatusOr<Verdict> Tuner::MeasureBucket(const std::shared_ptr<Job>& job) {
  const Problem& p = job->problem;
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
    ASSIGN_OR_RETURN(lease, TakeLease(job, VerdictScope(), [&] { return FreshVerdict(p); },
                                      &theirs));
    if (!theirs && lease != nullptr && !job->remeasure) theirs = FreshVerdict(p);
    if (theirs) {
      spdlog::info("{} measured by another daemon: {}@v{}", key.ToString(), theirs->winner,
                   theirs->winner_version);
      CacheBucket(key, *theirs);
      return *std::move(theirs);
    }
    prev = store_.GetVerdict(fingerprint_, p.dtype, bucket);  // the holder may have replaced it
  }
  // The incumbent is the previous winner for this bucket, stale or not.
  std::optional<std::string> incumbent;
  if (set_aside) prev = absl::NotFoundError("set aside");
  if (std::optional<Verdict> own = set_aside ? node_verdicts_.Get(key) : std::nullopt) prev = *own;
  if (prev.ok() && !prev->winner.empty()) incumbent = prev->winner;
  spdlog::info("measuring {} (bucket {}) over {} candidates", p.ToString(), bucket.ToString(),
               eligible.size());
  ASSIGN_OR_RETURN(Verdict v,
                   RaceAt(job, eligible, eligible, incumbent, nullptr, options_.measure));
  if (set_aside) {
    node_verdicts_.Put(v);
    cache_.Put(key, v);
  } else if (absl::Status put = store_.PutVerdict(v); !put.ok()) {
    if (!absl::IsUnavailable(put)) return put;
    spdlog::warn("verdict of {} kept here until the store returns: {}", key.ToString(),
                 put.ToString());
    {
      absl::MutexLock lock(&mu_);
      pending_[key] = v;
      changed_.SignalAll();
    }
    cache_.Put(key, v);
  } else {
    CacheBucket(key, v);
  }
  Log(v);
  if (v.winner.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate passed the oracle for ", p.ToString(), ": ", v.reason));
  }
  return v;
}

}  // namespace arbiter
