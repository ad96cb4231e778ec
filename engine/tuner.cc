#include "engine/tuner.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/selection_policy.h"
#include "spdlog/spdlog.h"

namespace arbiter {

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
    changed_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<Verdict> Tuner::MeasureOnce(const Problem& p) {
  const BucketKey key = BucketKeyOf(p);
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
  if (running) return running->get();  // someone else measures this bucket
  absl::StatusOr<Verdict> result = MeasureBucket(p);
  promise.set_value(result);
  absl::MutexLock lock(&mu_);
  in_flight_.erase(key);
  changed_.SignalAll();
  return result;
}

void Tuner::Enqueue(const Problem& p) {
  const BucketKey key = BucketKeyOf(p);
  absl::MutexLock lock(&mu_);
  if (stopping_ || in_flight_.count(key)) return;
  for (const Problem& q : queue_) {
    if (BucketKeyOf(q) == key) return;
  }
  queue_.push_back(p);
  changed_.SignalAll();
}

void Tuner::WaitIdle() {
  absl::MutexLock lock(&mu_);
  while (!stopping_ && !(queue_.empty() && !busy_ && in_flight_.empty())) changed_.Wait(&mu_);
}

bool Tuner::HasFreshVerdict(const Problem& p) {
  absl::StatusOr<Verdict> v = store_.GetVerdict(fingerprint_, p.dtype, BucketOf(p));
  return v.ok() && v->candidates == RacedSet(Eligible(registry_, quarantine_, p, nullptr));
}

void Tuner::BackgroundLoop() {
  while (true) {
    Problem p;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) changed_.Wait(&mu_);
      if (stopping_) return;
      p = queue_.front();
      queue_.pop_front();
      busy_ = true;
    }
    // A synchronous request may have measured the bucket while this one waited in the queue.
    if (!HasFreshVerdict(p)) {
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

absl::StatusOr<Verdict> Tuner::MeasureBucket(const Problem& p) {
  const auto t0 = std::chrono::steady_clock::now();
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
  // Measure the highest tiers first: a fast early median lets hopeless candidates stop early.
  std::vector<const RegisteredCandidate*> order = eligible;
  std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) {
    return x->spec.tier > y->spec.tier;
  });
  spdlog::info("measuring {} (bucket {}) over {} candidates", p.ToString(), bucket.ToString(),
               order.size());
  MeasureReport report;
  {
    ASSIGN_OR_RETURN(StreamPool::Lease stream, streams_.Acquire(/*bounded=*/false));
    Measurer measurer(backend_, *stream, options_.measure);
    ASSIGN_OR_RETURN(report, measurer.Race(p, order));
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
  v.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
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
  RETURN_IF_ERROR(store_.PutVerdict(v));
  cache_.Put(BucketKey{p.dtype, bucket}, v);
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
