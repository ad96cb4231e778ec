#include "engine/tuner.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "engine/refinement.h"
#include "engine/selection_policy.h"
#include "spdlog/spdlog.h"

namespace arbiter {

namespace {

// Refinements waiting for the background thread, at most; more are dropped (a
// hot shape that missed its turn becomes hot again after the counts restart).
constexpr size_t kMaxQueuedRefinements = 256;

std::string Us(double seconds) { return absl::StrFormat("%.4gus", seconds * 1e6); }

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Tuner::Tuner(const TunerOptions& options, Backend& backend, const Registry& registry,
             VerdictStore& store, NodeVerdicts& node_verdicts, StreamPool& streams,
             Quarantine& quarantine, VerdictCache& cache)
    : options_(options),
      backend_(backend),
      registry_(registry),
      store_(store),
      node_verdicts_(node_verdicts),
      streams_(streams),
      quarantine_(quarantine),
      cache_(cache),
      fingerprint_(backend.info().Fingerprint()) {
  thread_ = std::thread([this] { BackgroundLoop(); });
}

Tuner::~Tuner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
    refine_queue_.clear();
    changed_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

template <typename Work>
absl::StatusOr<Verdict> Tuner::SingleFlight(const FlightKey& key, Work work) {
  std::promise<absl::StatusOr<Verdict>> promise;
  std::optional<Result> running;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      running = it->second;
    } else {
      in_flight_.emplace(key, promise.get_future().share());
    }
  }
  if (running) return running->get();  // someone else measures it
  absl::StatusOr<Verdict> result = work();
  promise.set_value(result);
  absl::MutexLock lock(&mu_);
  in_flight_.erase(key);
  changed_.SignalAll();
  return result;
}

absl::StatusOr<Verdict> Tuner::MeasureOnce(const Problem& p, const MeasureCall& call) {
  return SingleFlight(FlightKey{BucketKeyOf(p), ""}, [&] { return MeasureBucket(p, call); });
}

absl::StatusOr<Verdict> Tuner::Refine(const Problem& p, const MeasureCall& call) {
  const BucketKey key = BucketKeyOf(p);
  if (!node_verdicts_.empty()) {
    // A bucket set aside for this node is measured and kept here alone, whole.
    absl::StatusOr<Verdict> stored = store_.GetVerdict(fingerprint_, key.dtype, key.bucket);
    if (node_verdicts_.SetAside(key, stored.ok() ? &*stored : nullptr)) return MeasureOnce(p, call);
  }
  absl::StatusOr<std::optional<Verdict>> bucket = LoadBucket(key);
  const std::vector<const RegisteredCandidate*> eligible =
      Eligible(registry_, quarantine_, p, nullptr);
  // Nothing fresh to refine (or the store cannot say), or `p` is where the bucket
  // was measured: measure the bucket.
  if (!bucket.ok() || !*bucket || (*bucket)->candidates != RacedSet(eligible) ||
      (*bucket)->measured == p || (*bucket)->winner.empty()) {
    return MeasureOnce(p, call);
  }
  return SingleFlight(FlightKey{key, VerdictScope::Shape(p).ToString()},
                      [&] { return RefineShape(p, **bucket, eligible); });
}

void Tuner::Enqueue(const Problem& p) {
  const BucketKey key = BucketKeyOf(p);
  absl::MutexLock lock(&mu_);
  if (stopping_ || in_flight_.count(FlightKey{key, ""})) return;
  for (const Problem& q : queue_) {
    if (BucketKeyOf(q) == key) return;
  }
  queue_.push_back(p);
  changed_.SignalAll();
}

void Tuner::EnqueueRefinement(const Problem& p) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || refine_queue_.size() >= kMaxQueuedRefinements) return;
  if (std::find(refine_queue_.begin(), refine_queue_.end(), p) != refine_queue_.end()) return;
  refine_queue_.push_back(p);
  changed_.SignalAll();
}

void Tuner::WaitIdle() {
  absl::MutexLock lock(&mu_);
  while (!stopping_ &&
         !(queue_.empty() && refine_queue_.empty() && !busy_ && in_flight_.empty())) {
    changed_.Wait(&mu_);
  }
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

absl::StatusOr<std::unique_ptr<StoreLease>> Tuner::TakeLease(const Problem& p,
                                                             const MeasureCall& call,
                                                             std::optional<Verdict>* theirs) {
  const BucketKey key = BucketKeyOf(p);
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
    if (!call.wait) {
      return absl::AbortedError(
          absl::StrCat(key.ToString(), " is being measured by another daemon"));
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
    RETURN_IF_ERROR(CheckDeadline(call.deadline, "waiting for another daemon's measurement"));
    absl::Duration wait = absl::FromChrono(options_.lease_poll);
    if (call.deadline) {
      wait = std::min(wait, absl::FromChrono(*call.deadline - std::chrono::system_clock::now()));
    }
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("the engine is stopping");
    changed_.WaitWithTimeout(&mu_, std::max(wait, absl::ZeroDuration()));
  }
}

void Tuner::BackgroundLoop() {
  while (true) {
    Problem p;
    bool queued = false;
    bool refine = false;
    {
      absl::MutexLock lock(&mu_);
      // Verdicts waiting for the store are retried each second, or at once on a
      // notification (the store is back).
      while (!stopping_ && queue_.empty() && refine_queue_.empty()) {
        if (pending_.empty()) {
          changed_.Wait(&mu_);
        } else {
          changed_.WaitWithTimeout(&mu_, absl::Seconds(1));
          break;
        }
      }
      if (stopping_) return;
      // Buckets first: a bucket with no verdict serves worse than a shape without its own.
      if (!queue_.empty()) {
        p = queue_.front();
        queue_.pop_front();
        busy_ = true;
        queued = true;
      } else if (!refine_queue_.empty()) {
        p = refine_queue_.front();
        refine_queue_.pop_front();
        busy_ = true;
        queued = true;
        refine = true;
      }
    }
    WriteBack();
    if (!queued) continue;
    if (refine) {
      MeasureCall call;
      call.wait = false;
      absl::StatusOr<Verdict> v = Refine(p, call);
      if (!v.ok() && !absl::IsAborted(v.status())) {
        spdlog::warn("background refinement of {} failed: {}", p.ToString(), v.status().ToString());
      }
    } else if (!HasFreshVerdict(p)) {
      // A synchronous request may have measured the bucket while this one waited in the queue.
      MeasureCall call;
      call.wait = false;
      absl::StatusOr<Verdict> v = MeasureOnce(p, call);
      if (absl::IsAborted(v.status())) {
        spdlog::debug("background tuning of {} left to another daemon", p.ToString());
      } else if (!v.ok()) {
        spdlog::warn("background tuning of {} failed: {}", p.ToString(), v.status().ToString());
      }
    }
    absl::MutexLock lock(&mu_);
    busy_ = false;
    changed_.SignalAll();
  }
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

absl::StatusOr<Verdict> Tuner::RaceAt(const Problem& p,
                                      const std::vector<const RegisteredCandidate*>& eligible,
                                      const std::vector<const RegisteredCandidate*>& racers,
                                      const std::optional<std::string>& incumbent,
                                      const NotRaced& not_raced) {
  const auto t0 = std::chrono::steady_clock::now();
  // The highest tiers first: a fast early median lets hopeless candidates stop early.
  std::vector<const RegisteredCandidate*> order = racers;
  std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) {
    return x->spec.tier > y->spec.tier;
  });
  MeasureReport report;
  {
    ASSIGN_OR_RETURN(StreamPool::Lease stream, streams_.Acquire(/*bounded=*/false));
    Measurer measurer(backend_, *stream, options_.measure);
    ASSIGN_OR_RETURN(report, measurer.Race(p, order));
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
  const Decision d = Decide(v.results, Determinism::kNondeterministic, incumbent, options_.noise);
  v.winner = d.winner;
  v.winner_version = d.winner_version;
  v.source = VerdictSource::kMeasured;
  v.reason = d.reason;
  if (v.sm_clock_max_mhz > 0) {
    // Kept in the reason, which every store persists, so the listing shows it.
    absl::StrAppend(&v.reason, absl::StrFormat("; SM clock %.0f-%.0f MHz while timing",
                                               v.sm_clock_min_mhz, v.sm_clock_max_mhz));
  }
  if (observer_) {
    observer_->OnTuning(
        p, v, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return v;
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

absl::StatusOr<Verdict> Tuner::MeasureBucket(const Problem& p, const MeasureCall& call) {
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
    ASSIGN_OR_RETURN(lease, TakeLease(p, call, &theirs));
    if (!theirs && lease != nullptr && !call.remeasure) theirs = FreshVerdict(p);
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
  ASSIGN_OR_RETURN(Verdict v, RaceAt(p, eligible, eligible, incumbent, nullptr));
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

absl::StatusOr<Verdict> Tuner::RefineShape(const Problem& p, const Verdict& bucket,
                                           const std::vector<const RegisteredCandidate*>& eligible) {
  const std::vector<std::string> leaders = Leaders(bucket, options_.refine);
  std::vector<const RegisteredCandidate*> racers;
  for (const std::string& name : leaders) {
    for (const RegisteredCandidate* c : eligible) {
      if (c->spec.name == name) racers.push_back(c);
    }
  }
  const std::string at = bucket.measured.ToString();
  spdlog::info("refining {} inside bucket {} (measured at {}) over {} leading candidates",
               p.ToString(), bucket.bucket.ToString(), at, racers.size());
  const auto not_raced = [&](const RegisteredCandidate& c) {
    const CandidateResult* r = bucket.Result(c.spec.name);
    const CandidateResult* w = bucket.Result(bucket.winner);
    if (r != nullptr && r->timed() && w != nullptr && w->median_seconds > 0) {
      return absl::StrFormat("not a leader of the bucket's verdict: %s at %s, %.2fx its winner",
                             Us(r->median_seconds), at, r->median_seconds / w->median_seconds);
    }
    return absl::StrCat("not a leader of the bucket's verdict: ",
                        r != nullptr ? ResultStateName(r->state) : "not raced", " at ", at);
  };
  ASSIGN_OR_RETURN(Verdict v, RaceAt(p, eligible, racers, bucket.winner, not_raced));
  v.scope = VerdictScope::Shape(p);
  v.reason = absl::StrCat("refined among the leaders of the bucket's verdict (measured at ", at,
                          ", winner ", bucket.winner, "): ", v.reason);
  RETURN_IF_ERROR(store_.PutVerdict(v));
  Log(v);
  if (!v.winner.empty() && v.winner != bucket.winner && !IsSplit(bucket)) {
    RETURN_IF_ERROR(Split(p, bucket, v, eligible));
  }
  RETURN_IF_ERROR(Recache(BucketKeyOf(p)));
  if (v.winner.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no leading candidate passed the oracle for ", p.ToString(), ": ", v.reason));
  }
  return v;
}

absl::Status Tuner::Split(const Problem& p, const Verdict& bucket, const Verdict& refined,
                          const std::vector<const RegisteredCandidate*>& eligible) {
  const auto halves = SplitBetween(bucket.bucket, bucket.measured, p);
  const Transfer t = TransferOf(refined, bucket.winner);
  const std::string evidence = absl::StrFormat(
      "at %s %s (%s) beat the bucket's winner %s (%s, %.3fx) beyond the noise", p.ToString(),
      refined.winner, Us(t.best_seconds), bucket.winner, Us(t.bucket_winner_seconds), t.regret());
  if (!halves) {
    spdlog::info("bucket {} not split: {}, but no half-octave separates {} from {}",
                 bucket.bucket.ToString(), evidence, p.ToString(), bucket.measured.ToString());
    return absl::OkStatus();
  }
  const bool first_home = halves->first.Contains(bucket.measured);
  const VerdictScope& home = first_home ? halves->first : halves->second;
  const VerdictScope& away = first_home ? halves->second : halves->first;
  spdlog::info("splitting bucket {} into {} and {}: {}", bucket.bucket.ToString(),
               halves->first.ToString(), halves->second.ToString(), evidence);
  // The half holding the bucket's measured shape keeps the bucket's figures.
  Verdict kept = bucket;
  kept.scoped.clear();
  kept.scope = home;
  kept.reason = absl::StrCat("split (", evidence, "); this half keeps the bucket's figures at ",
                             bucket.measured.ToString(), ": ", bucket.reason);
  // The other half is raced in full at the refined shape.
  ASSIGN_OR_RETURN(Verdict raced, RaceAt(p, eligible, eligible, bucket.winner, nullptr));
  raced.scope = away;
  raced.reason = absl::StrCat("split (", evidence, "); this half measured at ", p.ToString(), ": ",
                              raced.reason);
  RETURN_IF_ERROR(store_.PutVerdict(kept));
  RETURN_IF_ERROR(store_.PutVerdict(raced));
  Log(raced);
  return absl::OkStatus();
}

}  // namespace arbiter
