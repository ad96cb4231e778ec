#include "engine/tuner.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
             VerdictStore& store, StreamPool& streams, Quarantine& quarantine, VerdictCache& cache)
    : options_(options),
      backend_(backend),
      registry_(registry),
      store_(store),
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

absl::StatusOr<Verdict> Tuner::MeasureOnce(const Problem& p) {
  return SingleFlight(FlightKey{BucketKeyOf(p), ""}, [&] { return MeasureBucket(p); });
}

absl::StatusOr<Verdict> Tuner::Refine(const Problem& p) {
  const BucketKey key = BucketKeyOf(p);
  ASSIGN_OR_RETURN(std::optional<Verdict> bucket, LoadBucket(key));
  const std::vector<const RegisteredCandidate*> eligible =
      Eligible(registry_, quarantine_, p, nullptr);
  // Nothing fresh to refine, or `p` is where the bucket was measured: measure the bucket.
  if (!bucket || bucket->candidates != RacedSet(eligible) || bucket->measured == p ||
      bucket->winner.empty()) {
    return MeasureOnce(p);
  }
  return SingleFlight(FlightKey{key, VerdictScope::Shape(p).ToString()},
                      [&] { return RefineShape(p, *bucket, eligible); });
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

bool Tuner::HasFreshVerdict(const Problem& p) {
  absl::StatusOr<Verdict> v = store_.GetVerdict(fingerprint_, p.dtype, BucketOf(p));
  return v.ok() && v->candidates == RacedSet(Eligible(registry_, quarantine_, p, nullptr));
}

void Tuner::BackgroundLoop() {
  while (true) {
    Problem p;
    bool refine = false;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty() && refine_queue_.empty()) changed_.Wait(&mu_);
      if (stopping_) return;
      // Buckets first: a bucket with no verdict serves worse than a shape without its own.
      if (!queue_.empty()) {
        p = queue_.front();
        queue_.pop_front();
      } else {
        p = refine_queue_.front();
        refine_queue_.pop_front();
        refine = true;
      }
      busy_ = true;
    }
    if (refine) {
      absl::StatusOr<Verdict> v = Refine(p);
      if (!v.ok()) {
        spdlog::warn("background refinement of {} failed: {}", p.ToString(), v.status().ToString());
      }
    } else if (!HasFreshVerdict(p)) {
      // A synchronous request may have measured the bucket while this one waited in the queue.
      absl::StatusOr<Verdict> v = MeasureOnce(p);
      if (!v.ok()) {
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

absl::StatusOr<Verdict> Tuner::MeasureBucket(const Problem& p) {
  std::string why_none;
  const std::vector<const RegisteredCandidate*> eligible =
      Eligible(registry_, quarantine_, p, &why_none);
  if (eligible.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate can run ", p.ToString(), ": ", why_none));
  }
  const Bucket bucket = BucketOf(p);
  // The incumbent is the previous winner for this bucket, stale or not.
  std::optional<std::string> incumbent;
  if (absl::StatusOr<Verdict> prev = store_.GetVerdict(fingerprint_, p.dtype, bucket); prev.ok()) {
    if (!prev->winner.empty()) incumbent = prev->winner;
  }
  spdlog::info("measuring {} (bucket {}) over {} candidates", p.ToString(), bucket.ToString(),
               eligible.size());
  ASSIGN_OR_RETURN(Verdict v, RaceAt(p, eligible, eligible, incumbent, nullptr));
  RETURN_IF_ERROR(store_.PutVerdict(v));
  RETURN_IF_ERROR(Recache(BucketKeyOf(p)));
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
