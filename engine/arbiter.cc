#include "engine/arbiter.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/oracle.h"
#include "spdlog/spdlog.h"

namespace arbiter {

const char* TuningPolicyName(TuningPolicy p) {
  switch (p) {
    case TuningPolicy::kSync: return "sync";
    case TuningPolicy::kAsync: return "async";
    case TuningPolicy::kOff: return "off";
  }
  return "unknown";
}

std::optional<TuningPolicy> ParseTuningPolicy(std::string_view s) {
  for (TuningPolicy p : {TuningPolicy::kSync, TuningPolicy::kAsync, TuningPolicy::kOff}) {
    if (TuningPolicyName(p) == s) return p;
  }
  return std::nullopt;
}

// A fixed set of device streams; a worker leases one for a dispatch or a
// measurement. At most `max_waiters` callers wait; more are refused.
class Arbiter::StreamPool {
 public:
  class Lease {
   public:
    Lease(StreamPool* pool, std::unique_ptr<Stream> s) : pool_(pool), stream_(std::move(s)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (stream_) pool_->Return(std::move(stream_));
    }
    Stream& operator*() { return *stream_; }
    Stream* get() { return stream_.get(); }

   private:
    StreamPool* pool_;
    std::unique_ptr<Stream> stream_;
  };

  StreamPool(std::vector<std::unique_ptr<Stream>> streams, size_t max_waiters)
      : free_(std::move(streams)), max_waiters_(max_waiters) {}

  absl::StatusOr<Lease> Acquire(bool bounded) {
    std::unique_lock lock(mu_);
    if (free_.empty() && bounded && waiters_ >= max_waiters_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "work queue full: ", waiters_, " requests already waiting for a device stream (limit ",
          max_waiters_, ")"));
    }
    ++waiters_;
    cv_.wait(lock, [&] { return !free_.empty(); });
    --waiters_;
    std::unique_ptr<Stream> s = std::move(free_.back());
    free_.pop_back();
    return Lease(this, std::move(s));
  }

  size_t waiting() const {
    std::lock_guard lock(mu_);
    return waiters_;
  }

 private:
  void Return(std::unique_ptr<Stream> s) {
    {
      std::lock_guard lock(mu_);
      free_.push_back(std::move(s));
    }
    cv_.notify_one();
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Stream>> free_;  // GUARDED_BY(mu_)
  size_t waiters_ = 0;                         // GUARDED_BY(mu_)
  const size_t max_waiters_;
};

namespace {

// DEADLINE_EXCEEDED, saying how long ago and at which point, when `deadline` has passed.
absl::Status CheckDeadline(const std::optional<std::chrono::system_clock::time_point>& deadline,
                           const char* where) {
  if (!deadline) return absl::OkStatus();
  const auto now = std::chrono::system_clock::now();
  if (now <= *deadline) return absl::OkStatus();
  const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(now - *deadline);
  return absl::DeadlineExceededError(absl::StrCat("deadline passed ", late.count(), " ms ago ",
                                                  where, "; the work was not started"));
}

}  // namespace

struct Arbiter::InFlight {
  std::shared_future<absl::StatusOr<Verdict>> result;
};

absl::StatusOr<std::unique_ptr<Arbiter>> Arbiter::Create(const ArbiterOptions& options,
                                                         std::unique_ptr<Backend> backend,
                                                         std::unique_ptr<Registry> registry,
                                                         std::unique_ptr<VerdictStore> store) {
  if (options.workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("workers: expected >= 1, got ", options.workers));
  }
  std::unique_ptr<Arbiter> arbiter(
      new Arbiter(options, std::move(backend), std::move(registry), std::move(store)));
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < options.workers; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<Stream> s, arbiter->backend_->CreateStream());
    streams.push_back(std::move(s));
  }
  arbiter->streams_ = std::make_unique<StreamPool>(std::move(streams), options.max_queue);
  RETURN_IF_ERROR(arbiter->RefreshQuarantine());
  arbiter->tuning_thread_ = std::thread([a = arbiter.get()] { a->TuningLoop(); });
  for (const RegisteredCandidate& c : arbiter->registry_->candidates()) {
    if (c.device_ok) {
      spdlog::info("candidate {} eligible on {}", absl::StrCat(c.spec.name, "@v", c.spec.version),
                   arbiter->device().name);
    } else {
      spdlog::info("candidate {} ineligible: {}", absl::StrCat(c.spec.name, "@v", c.spec.version),
                   c.device_reason);
    }
  }
  return arbiter;
}

Arbiter::Arbiter(const ArbiterOptions& options, std::unique_ptr<Backend> backend,
                 std::unique_ptr<Registry> registry, std::unique_ptr<VerdictStore> store)
    : options_(options),
      backend_(std::move(backend)),
      registry_(std::move(registry)),
      store_(std::move(store)),
      fingerprint_(backend_->info().Fingerprint()) {}

Arbiter::~Arbiter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    tune_queue_.clear();
  }
  cv_.notify_all();
  if (tuning_thread_.joinable()) tuning_thread_.join();
}

std::string Arbiter::BucketKey(DType dtype, const Bucket& b) {
  return absl::StrCat(DTypeName(dtype), "/", b.ToString());
}

bool Arbiter::IsQuarantined(const CandidateSpec& c, DType dtype, const Bucket& bucket) const {
  std::lock_guard lock(mu_);
  for (const QuarantineEntry& q : quarantine_) {
    if (q.candidate != c.name || (q.version != 0 && q.version != c.version)) continue;
    if (q.scope == "*" || q.scope == DTypeName(dtype) || q.scope == BucketKey(dtype, bucket)) {
      return true;
    }
  }
  return false;
}

absl::Status Arbiter::RefreshQuarantine() {
  ASSIGN_OR_RETURN(std::vector<QuarantineEntry> entries, store_->ListQuarantine(fingerprint_));
  std::lock_guard lock(mu_);
  quarantine_ = std::move(entries);
  return absl::OkStatus();
}

std::vector<const RegisteredCandidate*> Arbiter::Eligible(const Problem& p,
                                                          std::string* why_none) const {
  std::vector<const RegisteredCandidate*> out;
  std::vector<std::string> reasons;
  const Bucket bucket = BucketOf(p);
  for (const RegisteredCandidate& c : registry_->candidates()) {
    std::string gap = registry_->CoverageGap(c, p);
    if (gap.empty() && IsQuarantined(c.spec, p.dtype, bucket)) gap = "quarantined";
    if (gap.empty()) {
      out.push_back(&c);
    } else {
      reasons.push_back(absl::StrCat(c.spec.name, ": ", gap));
    }
  }
  if (out.empty() && why_none) *why_none = absl::StrJoin(reasons, "; ");
  return out;
}

std::string Arbiter::RacedSet(const std::vector<const RegisteredCandidate*>& eligible) {
  std::vector<std::string> names;
  for (const RegisteredCandidate* c : eligible) {
    names.push_back(absl::StrCat(c->spec.name, "@", c->spec.version));
  }
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ",");
}

std::optional<Verdict> Arbiter::CachedVerdict(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = verdict_cache_.find(key);
  if (it == verdict_cache_.end()) return std::nullopt;
  return it->second;
}

void Arbiter::CacheVerdict(const std::string& key, const Verdict& v) {
  std::lock_guard lock(mu_);
  // Bounded: past the limit, drop everything (cheap, and the store still has it all).
  if (verdict_cache_.size() >= options_.verdict_cache_entries) verdict_cache_.clear();
  verdict_cache_[key] = v;
}

void Arbiter::ClearVerdictCache() {
  std::lock_guard lock(mu_);
  verdict_cache_.clear();
}

absl::StatusOr<Selection> Arbiter::TierDefaultSelection(
    const Problem& p, const std::vector<const RegisteredCandidate*>& eligible,
    Determinism required, VerdictSource source, const std::string& why) const {
  const RegisteredCandidate* best = nullptr;
  for (const RegisteredCandidate* c : eligible) {
    if (c->spec.Member(p.dtype)->contract.determinism < required) continue;
    if (best == nullptr || c->spec.tier > best->spec.tier) best = c;
  }
  if (best == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no eligible candidate for ", p.ToString(), " guarantees ", DeterminismName(required)));
  }
  Selection s;
  s.candidate = best->spec.name;
  s.version = best->spec.version;
  s.source = source;
  s.bucket = BucketOf(p);
  s.reason = absl::StrCat("tier default (tier ", best->spec.tier, "): ", why);
  return s;
}

absl::StatusOr<Selection> Arbiter::FromVerdict(
    const Verdict& v, const Problem& p, const std::vector<const RegisteredCandidate*>& eligible,
    Determinism required) const {
  // Only candidates still eligible for this exact problem (quarantine may have come since).
  std::vector<CandidateResult> usable;
  for (const CandidateResult& r : v.results) {
    for (const RegisteredCandidate* c : eligible) {
      if (c->spec.name == r.name && c->spec.version == r.version) usable.push_back(r);
    }
  }
  Selection s;
  s.bucket = v.bucket;
  s.verdict = v;
  s.source = VerdictSource::kMeasured;
  const bool winner_usable =
      std::any_of(usable.begin(), usable.end(), [&](const CandidateResult& r) {
        return r.name == v.winner && r.determinism >= required && r.timed();
      });
  if (winner_usable) {
    s.candidate = v.winner;
    s.version = v.winner_version;
    s.reason = v.reason;
    return s;
  }
  // Derived from the same figures for a stricter determinism, or without a quarantined winner.
  const Decision d = Decide(usable, required, std::nullopt, options_.noise);
  if (d.winner.empty()) {
    return TierDefaultSelection(p, eligible, required, VerdictSource::kTierDefault,
                                absl::StrCat("the measured verdict has no usable candidate meeting ",
                                             DeterminismName(required), " (", d.reason, ")"));
  }
  s.candidate = d.winner;
  s.version = d.winner_version;
  s.reason = absl::StrCat("derived from the measured figures for ", DeterminismName(required), ": ",
                          d.reason);
  return s;
}

absl::StatusOr<Selection> Arbiter::Select(const Problem& p, const SelectOptions& options) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  std::string why_none;
  const std::vector<const RegisteredCandidate*> eligible = Eligible(p, &why_none);
  if (eligible.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate can run ", p.ToString(), " on this device: ", why_none));
  }
  const Bucket bucket = BucketOf(p);

  // 1. An operator's force.
  ASSIGN_OR_RETURN(std::optional<arbiter::Force> force, store_->GetForce(fingerprint_, p.dtype, bucket));
  if (force) {
    auto it = std::find_if(eligible.begin(), eligible.end(), [&](const RegisteredCandidate* c) {
      return c->spec.name == force->candidate;
    });
    if (it != eligible.end() &&
        (*it)->spec.Member(p.dtype)->contract.determinism >= options.required) {
      Selection s;
      s.candidate = (*it)->spec.name;
      s.version = (*it)->spec.version;
      s.source = VerdictSource::kForced;
      s.bucket = bucket;
      s.reason = absl::StrCat("forced: ", force->reason);
      if (observer_) observer_->OnSelection(p, s, true);
      return s;
    }
    spdlog::warn("force of {} for {} {} not applied: not eligible for {} or below {}",
                 force->candidate, DTypeName(p.dtype), bucket.ToString(), p.ToString(),
                 DeterminismName(options.required));
  }

  // 2. A stored verdict that raced exactly the candidates (and versions) eligible now.
  const std::string key = BucketKey(p.dtype, bucket);
  const std::string raced = RacedSet(eligible);
  std::optional<Verdict> stored = CachedVerdict(key);
  if (!stored) {
    absl::StatusOr<Verdict> v = store_->GetVerdict(fingerprint_, p.dtype, bucket);
    if (v.ok()) {
      stored = *v;
      CacheVerdict(key, *v);
    } else if (!absl::IsNotFound(v.status())) {
      return v.status();
    }
  }
  if (stored && stored->candidates == raced) {
    absl::StatusOr<Selection> s = FromVerdict(*stored, p, eligible, options.required);
    if (s.ok() && observer_) observer_->OnSelection(p, *s, true);
    return s;
  }
  const std::string miss = stored ? absl::StrCat("stored verdict raced {", stored->candidates,
                                                 "}, eligible now {", raced, "}")
                                  : "no verdict for this bucket yet";

  // 3. A miss: the tuning policy decides.
  const TuningPolicy policy = options.tuning.value_or(options_.tuning);
  absl::StatusOr<Selection> s;
  switch (policy) {
    case TuningPolicy::kSync: {
      ASSIGN_OR_RETURN(Verdict v, MeasureOnce(p));
      s = FromVerdict(v, p, eligible, options.required);
      break;
    }
    case TuningPolicy::kAsync:
      EnqueueTuning(p);
      s = TierDefaultSelection(p, eligible, options.required, VerdictSource::kProvisional,
                               absl::StrCat(miss, "; measuring in the background"));
      break;
    case TuningPolicy::kOff:
      s = TierDefaultSelection(p, eligible, options.required, VerdictSource::kTierDefault,
                               absl::StrCat(miss, "; tuning is off"));
      break;
  }
  if (s.ok() && observer_) observer_->OnSelection(p, *s, false);
  return s;
}

absl::StatusOr<DispatchResult> Arbiter::Dispatch(const Problem& p, const SelectOptions& options,
                                                 const void* a, size_t a_bytes, const void* b,
                                                 size_t b_bytes) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  if (a_bytes != p.a_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("a: expected ", p.a_bytes(), " bytes (m*k = ",
                                                   p.m, "*", p.k, " elements of ", DTypeName(p.dtype),
                                                   "), got ", a_bytes));
  }
  if (b_bytes != p.b_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("b: expected ", p.b_bytes(), " bytes (k*n = ",
                                                   p.k, "*", p.n, " elements of ", DTypeName(p.dtype),
                                                   "), got ", b_bytes));
  }
  RETURN_IF_ERROR(CheckDeadline(options.deadline, "on arrival"));
  ASSIGN_OR_RETURN(Selection sel, Select(p, options));
  const RegisteredCandidate* rc = registry_->Find(sel.candidate);
  const CandidateMember* member = rc ? rc->spec.Member(p.dtype) : nullptr;
  if (member == nullptr) {
    return absl::InternalError(absl::StrCat("selected candidate ", sel.candidate, " has no ",
                                            DTypeName(p.dtype), " entry point"));
  }
  ASSIGN_OR_RETURN(StreamPool::Lease stream, streams_->Acquire(/*bounded=*/true));
  RETURN_IF_ERROR(CheckDeadline(options.deadline, "while selecting or queued for a device stream"));
  absl::StatusOr<DispatchResult> result = [&]() -> absl::StatusOr<DispatchResult> {
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> da, backend_->Allocate(p.a_bytes()));
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> db, backend_->Allocate(p.b_bytes()));
    ASSIGN_OR_RETURN(std::unique_ptr<Buffer> dc, backend_->Allocate(p.c_bytes()));
    RETURN_IF_ERROR((*stream).CopyToDevice(*da, a, a_bytes));
    RETURN_IF_ERROR((*stream).CopyToDevice(*db, b, b_bytes));
    const GemmArgs args{p, da->data(), db->data(), dc->data(), stream.get()};
    RETURN_IF_ERROR((*stream).TimerStart());
    if (absl::Status s = member->run(args); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(sel.candidate, " failed on ", p.ToString(), ": ",
                                                 s.message()));
    }
    RETURN_IF_ERROR((*stream).TimerStop());
    DispatchResult r;
    ASSIGN_OR_RETURN(r.device_seconds, (*stream).ElapsedSeconds());
    r.c.resize(p.c_bytes());
    RETURN_IF_ERROR((*stream).CopyToHost(r.c.data(), *dc, p.c_bytes()));
    r.selection = sel;
    if (SampleForVerification()) {
      // A failed check quarantines the candidate but the (already computed) result is still
      // returned with the error logged: the client asked for this kernel's answer.
      if (absl::Status v = VerifyDispatch(p, sel, *member, *stream, *da, *db, r.c); !v.ok()) {
        spdlog::error("sampled verification of {} on {}: {}", sel.candidate, p.ToString(),
                      v.ToString());
      }
    }
    return r;
  }();
  if (observer_) {
    observer_->OnDispatch(p, sel, result.ok() ? result->device_seconds : 0, result.status());
  }
  return result;
}

bool Arbiter::SampleForVerification() {
  if (options_.verify_fraction <= 0) return false;
  if (options_.verify_fraction >= 1) return true;
  // Deterministic sampling: every (1/fraction)-th dispatch, so the rate is exact and testable.
  const uint64_t period = static_cast<uint64_t>(1.0 / options_.verify_fraction + 0.5);
  return dispatch_counter_.fetch_add(1) % period == 0;
}

absl::Status Arbiter::VerifyDispatch(const Problem& p, const Selection& sel,
                                     const CandidateMember& member, Stream& stream, const Buffer& a,
                                     const Buffer& b, const std::vector<uint8_t>& c) {
  std::vector<double> ref;
  RETURN_IF_ERROR(stream.Reference(p, a, b, &ref));
  const OracleReport report = CheckOutput(p, member.contract.accuracy, c.data(), ref);
  if (observer_) observer_->OnVerification(p, sel, report.max_rel_error, report.pass);
  if (report.pass) return absl::OkStatus();
  const std::string scope = BucketKey(p.dtype, BucketOf(p));
  RETURN_IF_ERROR(Quarantine(sel.candidate, scope,
                             absl::StrCat("sampled dispatch ", p.ToString(), " out of budget: ",
                                          report.detail)));
  ClearVerdictCache();
  return absl::DataLossError(absl::StrCat(sel.candidate, " produced an out-of-budget result on ",
                                          p.ToString(), "; quarantined for ", scope));
}

absl::StatusOr<Verdict> Arbiter::MeasureBucket(const Problem& p) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string why_none;
  const std::vector<const RegisteredCandidate*> eligible = Eligible(p, &why_none);
  if (eligible.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate can run ", p.ToString(), ": ", why_none));
  }
  const Bucket bucket = BucketOf(p);
  // The incumbent is the previous winner for this bucket, stale or not.
  std::optional<std::string> incumbent;
  if (absl::StatusOr<Verdict> prev = store_->GetVerdict(fingerprint_, p.dtype, bucket); prev.ok()) {
    if (!prev->winner.empty()) incumbent = prev->winner;
  }
  // Measure the highest tiers first: a fast early median lets hopeless candidates stop early.
  std::vector<const RegisteredCandidate*> order = eligible;
  std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) {
    return x->spec.tier > y->spec.tier;
  });
  spdlog::info("measuring {} (bucket {}) over {} candidates", p.ToString(), bucket.ToString(),
               order.size());
  std::vector<Measurement> measured;
  {
    ASSIGN_OR_RETURN(StreamPool::Lease stream, streams_->Acquire(/*bounded=*/false));
    Measurer measurer(*backend_, *stream, options_.measure);
    ASSIGN_OR_RETURN(measured, measurer.Measure(p, order));
  }
  ++measurements_;

  Verdict v;
  v.fingerprint = fingerprint_;
  v.dtype = p.dtype;
  v.bucket = bucket;
  v.candidates = RacedSet(eligible);
  v.measured = p;
  v.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  // Results in registration order, so the tier default's tie-break is stable.
  for (const RegisteredCandidate* c : eligible) {
    for (Measurement& m : measured) {
      if (m.result.name != c->spec.name) continue;
      if (m.claim_violation) {
        QuarantineEntry q{c->spec.name, c->spec.version, std::string(DTypeName(p.dtype)),
                          fingerprint_, m.result.reason, v.created_unix};
        spdlog::warn("quarantining {}@v{} for {}: {}", q.candidate, q.version, q.scope, q.reason);
        RETURN_IF_ERROR(store_->PutQuarantine(q));
        RETURN_IF_ERROR(RefreshQuarantine());
        if (observer_) observer_->OnQuarantine(q);
      }
      v.results.push_back(m.result);
    }
  }
  const Decision d = Decide(v.results, Determinism::kNondeterministic, incumbent, options_.noise);
  v.winner = d.winner;
  v.winner_version = d.winner_version;
  v.source = VerdictSource::kMeasured;
  v.reason = d.reason;
  RETURN_IF_ERROR(store_->PutVerdict(v));
  CacheVerdict(BucketKey(p.dtype, bucket), v);
  {
    std::ostringstream os;
    os << v;
    spdlog::info("verdict {}", os.str());
    for (const CandidateResult& r : v.results) {
      std::ostringstream rs;
      rs << r;
      spdlog::info("  {}", rs.str());
    }
  }
  if (observer_) {
    observer_->OnTuning(p, v, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (v.winner.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate passed the oracle for ", p.ToString(), ": ", d.reason));
  }
  return v;
}

absl::StatusOr<Verdict> Arbiter::MeasureOnce(const Problem& p) {
  const std::string key = BucketKey(p.dtype, BucketOf(p));
  std::shared_ptr<InFlight> flight;
  std::promise<absl::StatusOr<Verdict>> promise;
  {
    std::lock_guard lock(mu_);
    auto it = in_flight_.find(key);
    if (it != in_flight_.end()) {
      flight = it->second;
    } else {
      auto f = std::make_shared<InFlight>();
      f->result = promise.get_future().share();
      in_flight_[key] = f;
    }
  }
  if (flight) return flight->result.get();  // someone else measures this bucket
  absl::StatusOr<Verdict> result = MeasureBucket(p);
  promise.set_value(result);
  {
    std::lock_guard lock(mu_);
    in_flight_.erase(key);
  }
  cv_.notify_all();
  return result;
}

void Arbiter::EnqueueTuning(const Problem& p) {
  const std::string key = BucketKey(p.dtype, BucketOf(p));
  {
    std::lock_guard lock(mu_);
    if (stopping_ || in_flight_.count(key)) return;
    for (const Problem& q : tune_queue_) {
      if (BucketKey(q.dtype, BucketOf(q)) == key) return;
    }
    tune_queue_.push_back(p);
  }
  cv_.notify_all();
}

bool Arbiter::HasFreshVerdict(const Problem& p) {
  const Bucket bucket = BucketOf(p);
  absl::StatusOr<Verdict> v = store_->GetVerdict(fingerprint_, p.dtype, bucket);
  return v.ok() && v->candidates == RacedSet(Eligible(p, nullptr));
}

void Arbiter::TuningLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !tune_queue_.empty(); });
    if (stopping_) return;
    const Problem p = tune_queue_.front();
    tune_queue_.erase(tune_queue_.begin());
    tuning_busy_ = true;
    lock.unlock();
    // A synchronous request may have measured the bucket while this one waited in the queue.
    if (!HasFreshVerdict(p)) {
      absl::StatusOr<Verdict> v = MeasureOnce(p);
      if (!v.ok()) {
        spdlog::warn("background tuning of {} failed: {}", p.ToString(), v.status().ToString());
      }
    }
    lock.lock();
    tuning_busy_ = false;
    cv_.notify_all();
  }
}

void Arbiter::WaitIdle() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stopping_ || (tune_queue_.empty() && !tuning_busy_ && in_flight_.empty()); });
}

size_t Arbiter::queue_depth() const { return streams_->waiting(); }

absl::StatusOr<Verdict> Arbiter::Tune(const Problem& p) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  return MeasureOnce(p);
}

std::vector<CandidateStatus> Arbiter::ListCandidates() const {
  std::vector<CandidateStatus> out;
  std::lock_guard lock(mu_);
  for (const RegisteredCandidate& c : registry_->candidates()) {
    CandidateStatus s;
    s.candidate = &c;
    s.eligible = c.device_ok;
    s.reason = c.device_reason;
    for (const QuarantineEntry& q : quarantine_) {
      if (q.candidate != c.spec.name || (q.version != 0 && q.version != c.spec.version)) continue;
      s.quarantine.push_back(q);
      if (q.scope == "*") {
        s.eligible = false;
        s.reason = absl::StrCat("quarantined: ", q.reason);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<Verdict>> Arbiter::ListVerdicts(const VerdictFilter& filter) const {
  return store_->ListVerdicts(fingerprint_, filter);
}

absl::Status Arbiter::Force(const Problem& p, const std::string& candidate,
                            const std::string& reason) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  const RegisteredCandidate* c = registry_->Find(candidate);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("candidate \"", candidate, "\": unknown"));
  const Bucket bucket = BucketOf(p);
  if (std::string gap = registry_->CoverageGap(*c, p); !gap.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("candidate \"", candidate,
                                                      "\" does not cover ", p.ToString(), " (bucket ",
                                                      bucket.ToString(), "): ", gap));
  }
  arbiter::Force f{fingerprint_, p.dtype, bucket, candidate, reason,
          std::chrono::duration_cast<std::chrono::seconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count()};
  return store_->PutForce(f);
}

absl::StatusOr<bool> Arbiter::Unforce(const Problem& p) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  return store_->RemoveForce(fingerprint_, p.dtype, BucketOf(p));
}

absl::StatusOr<std::vector<arbiter::Force>> Arbiter::ListForces() const {
  return store_->ListForces(fingerprint_);
}

absl::StatusOr<int> Arbiter::Invalidate(const InvalidateScope& scope) {
  ASSIGN_OR_RETURN(int removed, store_->Invalidate(fingerprint_, scope));
  ClearVerdictCache();
  return removed;
}

absl::StatusOr<std::vector<QuarantineEntry>> Arbiter::ListQuarantine() const {
  return store_->ListQuarantine(fingerprint_);
}

absl::StatusOr<int> Arbiter::ClearQuarantine(const std::string& candidate) {
  if (!candidate.empty() && registry_->Find(candidate) == nullptr) {
    return absl::NotFoundError(absl::StrCat("candidate \"", candidate, "\": unknown"));
  }
  ASSIGN_OR_RETURN(int removed, store_->ClearQuarantine(fingerprint_, candidate));
  RETURN_IF_ERROR(RefreshQuarantine());
  return removed;
}

absl::Status Arbiter::Quarantine(const std::string& candidate, const std::string& scope,
                                 const std::string& reason) {
  const RegisteredCandidate* c = registry_->Find(candidate);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("candidate \"", candidate, "\": unknown"));
  const std::string s = scope.empty() ? "*" : scope;
  if (s != "*" && !ParseDType(s)) {
    const size_t slash = s.find('/');
    if (slash == std::string::npos || !ParseDType(s.substr(0, slash)) ||
        !ParseBucket(s.substr(slash + 1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scope: expected \"*\", a dtype (f32, f64, f16, bf16) or \"dtype/bucket\", got \"", s, "\""));
    }
  }
  QuarantineEntry q{candidate, c->spec.version, s, fingerprint_, reason,
                    std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count()};
  RETURN_IF_ERROR(store_->PutQuarantine(q));
  RETURN_IF_ERROR(RefreshQuarantine());
  if (observer_) observer_->OnQuarantine(q);
  return absl::OkStatus();
}

}  // namespace arbiter
