#include "engine/arbiter.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/selection_policy.h"
#include "spdlog/spdlog.h"

namespace arbiter {

namespace {

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status UnknownCandidate(const std::string& candidate) {
  return absl::NotFoundError(absl::StrCat("candidate \"", candidate, "\": unknown"));
}

// How a quarantine for a candidate that took the daemon down begins: a second
// such death (in another bucket of the dtype) widens the scope to the dtype.
constexpr char kDiedMeasuring[] = "arbiterd died while measuring it";

}  // namespace

TuningPolicy EffectivePolicy(TuningPolicy daemon, std::optional<TuningPolicy> request) {
  // sync (1) > async (2) > off (3) in tuning: the larger value is the lesser tuning.
  if (!request) return daemon;
  return static_cast<int>(*request) > static_cast<int>(daemon) ? *request : daemon;
}

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

absl::StatusOr<std::unique_ptr<Arbiter>> Arbiter::Create(const ArbiterOptions& options,
                                                         std::unique_ptr<Backend> backend,
                                                         std::unique_ptr<Registry> registry,
                                                         std::unique_ptr<VerdictStore> store) {
  if (options.workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("workers: expected >= 1, got ", options.workers));
  }
  std::unique_ptr<Arbiter> a(
      new Arbiter(options, std::move(backend), std::move(registry), std::move(store)));
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < options.workers; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<Stream> s, a->backend_->CreateStream());
    streams.push_back(std::move(s));
  }
  a->streams_ = std::make_unique<StreamPool>(std::move(streams), options.max_queue);
  ASSIGN_OR_RETURN(a->quarantine_, Quarantine::Create(*a->store_, a->fingerprint_));
  a->verdict_cache_ = std::make_unique<VerdictCache>(options.verdict_cache_entries);
  a->dispatcher_ = std::make_unique<Dispatcher>(*a->backend_, *a->streams_, *a->quarantine_,
                                                *a->verdict_cache_, options.verify_fraction);
  if (!options.tuning_intent_file.empty()) {
    ASSIGN_OR_RETURN(a->journal_, IntentJournal::Open(options.tuning_intent_file));
    RETURN_IF_ERROR(a->QuarantineLeftover());
  }
  TunerOptions tuner;
  tuner.measure = options.measure;
  tuner.noise = options.noise;
  tuner.max_queued = options.tuning_queue;
  tuner.max_queued_per_peer = options.tuning_queue_per_peer;
  tuner.hang_seconds = options.tuning_hang_seconds;
  tuner.on_fault = options.on_fault;
  a->tuner_ = std::make_unique<Tuner>(tuner, *a->backend_, *a->registry_, *a->store_,
                                      *a->streams_, *a->quarantine_, *a->verdict_cache_,
                                      a->journal_.get());
  for (const RegisteredCandidate& c : a->registry_->candidates()) {
    if (c.device_ok) {
      spdlog::info("candidate {} eligible on {}", absl::StrCat(c.spec.name, "@v", c.spec.version),
                   a->device().name);
    } else {
      spdlog::info("candidate {} ineligible: {}", absl::StrCat(c.spec.name, "@v", c.spec.version),
                   c.device_reason);
    }
  }
  return a;
}

Arbiter::Arbiter(const ArbiterOptions& options, std::unique_ptr<Backend> backend,
                 std::unique_ptr<Registry> registry, std::unique_ptr<VerdictStore> store)
    : options_(options),
      backend_(std::move(backend)),
      registry_(std::move(registry)),
      store_(std::move(store)),
      fingerprint_(backend_->info().Fingerprint()) {}

Arbiter::~Arbiter() { tuner_.reset(); }

absl::Status Arbiter::QuarantineLeftover() {
  const std::optional<Intent>& left = journal_->leftover();
  if (!left) return absl::OkStatus();
  const BucketKey key = BucketKeyOf(left->problem);
  const std::string where =
      absl::StrCat(left->problem.ToString(), " (bucket ", key.ToString(), "), ", left->phase,
                   " phase, pid ", left->pid);
  const RegisteredCandidate* c = registry_->Find(left->candidate);
  if (c == nullptr || c->spec.version != left->version) {
    spdlog::warn("arbiterd (pid {}) died while measuring {}@v{} on {}; that version is no longer "
                 "registered, so nothing is quarantined",
                 left->pid, left->candidate, left->version, where);
    return journal_->Clear();
  }
  // The first death quarantines the bucket; a second, in another bucket of the dtype, the dtype.
  QuarantineScope scope = QuarantineScope::OfBucket(key);
  for (const arbiter::Quarantine::Entry& e : quarantine_->EntriesFor(c->spec)) {
    if (e.record.reason.rfind(kDiedMeasuring, 0) == 0 && e.scope.dtype == key.dtype &&
        e.scope.bucket && *e.scope.bucket != key.bucket) {
      scope = QuarantineScope::OfDType(key.dtype);
    }
  }
  const std::string reason = absl::StrCat(
      kDiedMeasuring, " (", where, "): ",
      left->cause.empty() ? "it crashed the process, or arbiterd was killed meanwhile (then clear "
                            "this entry)"
                          : left->cause,
      scope.bucket ? "" : "; the second such death in this dtype");
  spdlog::error("quarantining {}@v{} for {}: {}", c->spec.name, c->spec.version, scope.ToString(),
                reason);
  RETURN_IF_ERROR(quarantine_->Add(c->spec.name, c->spec.version, scope, reason));
  return journal_->Clear();
}

void Arbiter::set_observer(ArbiterObserver* observer) {
  observer_ = observer;
  quarantine_->set_observer(observer);
  dispatcher_->set_observer(observer);
  tuner_->set_observer(observer);
}

absl::StatusOr<Selection> Arbiter::Select(const Problem& p, const SelectOptions& options) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  return SelectValid(p, options);
}

absl::StatusOr<std::optional<Verdict>> Arbiter::StoredVerdict(const Problem& p) {
  const BucketKey key = BucketKeyOf(p);
  if (std::optional<Verdict> cached = verdict_cache_->Get(key)) return cached;
  absl::StatusOr<Verdict> v = store_->GetVerdict(fingerprint_, key.dtype, key.bucket);
  if (absl::IsNotFound(v.status())) return std::nullopt;
  if (!v.ok()) return v.status();
  verdict_cache_->Put(key, *v);
  return std::optional<Verdict>(*std::move(v));
}

absl::StatusOr<Selection> Arbiter::SelectValid(const Problem& p, const SelectOptions& options) {
  std::string why_none;
  const std::vector<const RegisteredCandidate*> eligible =
      Eligible(*registry_, *quarantine_, p, &why_none);
  if (eligible.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate can run ", p.ToString(), " on this device: ", why_none));
  }
  const Bucket bucket = BucketOf(p);

  // 1. An operator's force.
  ASSIGN_OR_RETURN(std::optional<arbiter::Force> force,
                   store_->GetForce(fingerprint_, p.dtype, bucket));
  if (force) {
    if (std::optional<Selection> s = SelectForced(*force, p, eligible, options.required)) {
      if (observer_) observer_->OnSelection(p, *s, true);
      return *std::move(s);
    }
    spdlog::warn("force of {} for {} {} not applied: not eligible for {} or below {}",
                 force->candidate, DTypeName(p.dtype), bucket.ToString(), p.ToString(),
                 DeterminismName(options.required));
  }

  // 2. A stored verdict that raced exactly the candidates (and versions) eligible now.
  const std::string raced = RacedSet(eligible);
  ASSIGN_OR_RETURN(std::optional<Verdict> stored, StoredVerdict(p));
  if (stored && stored->candidates == raced) {
    absl::StatusOr<Selection> s =
        SelectFromVerdict(*stored, p, eligible, options.required, options_.noise);
    if (s.ok() && observer_) observer_->OnSelection(p, *s, true);
    return s;
  }
  const std::string miss = stored ? absl::StrCat("stored verdict raced {", stored->candidates,
                                                 "}, eligible now {", raced, "}")
                                  : "no verdict for this bucket yet";

  // 3. A miss: the tuning policy decides - the daemon's, or less if the request asks.
  absl::StatusOr<Selection> s;
  switch (EffectivePolicy(options_.tuning, options.tuning)) {
    case TuningPolicy::kSync: {
      absl::StatusOr<Verdict> v = tuner_->MeasureOnce(p, options.call());
      if (absl::IsResourceExhausted(v.status())) {
        s = SelectTierDefault(p, eligible, options.required, VerdictSource::kTierDefault,
                              absl::StrCat(miss, "; not measured: ", v.status().message()));
        break;
      }
      if (!v.ok()) return v.status();
      s = SelectFromVerdict(*v, p, eligible, options.required, options_.noise);
      break;
    }
    case TuningPolicy::kAsync:
      if (absl::Status queued = tuner_->Enqueue(p, options.peer); !queued.ok()) {
        s = SelectTierDefault(p, eligible, options.required, VerdictSource::kTierDefault,
                              absl::StrCat(miss, "; not measured: ", queued.message()));
        break;
      }
      s = SelectTierDefault(p, eligible, options.required, VerdictSource::kProvisional,
                            absl::StrCat(miss, "; measuring in the background"));
      break;
    case TuningPolicy::kOff:
      s = SelectTierDefault(p, eligible, options.required, VerdictSource::kTierDefault,
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
  RETURN_IF_ERROR(CheckOperandSizes(p, a_bytes, b_bytes));
  RETURN_IF_ERROR(CheckDeadline(options.deadline, "on arrival"));
  ASSIGN_OR_RETURN(const Selection selection, SelectValid(p, options));
  return dispatcher_->Run(p, selection, options.call(), a, b);
}

absl::StatusOr<Verdict> Arbiter::Tune(const Problem& p, const CallContext& caller) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  return tuner_->MeasureOnce(p, caller);
}

std::vector<CandidateStatus> Arbiter::ListCandidates() const {
  std::vector<CandidateStatus> out;
  for (const RegisteredCandidate& c : registry_->candidates()) {
    CandidateStatus s;
    s.candidate = &c;
    s.eligible = c.device_ok;
    s.reason = c.device_reason;
    for (const arbiter::Quarantine::Entry& q : quarantine_->EntriesFor(c.spec)) {
      s.quarantine.push_back(q.record);
      if (q.scope.everywhere()) {
        s.eligible = false;
        s.reason = absl::StrCat("quarantined: ", q.record.reason);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<Verdict>> Arbiter::ListVerdicts(const VerdictFilter& filter) const {
  return store_->ListVerdicts(fingerprint_, filter);
}

absl::StatusOr<int64_t> Arbiter::CountVerdicts() const {
  return store_->CountVerdicts(fingerprint_);
}

absl::Status Arbiter::Force(const Problem& p, const std::string& candidate,
                            const std::string& reason) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  const RegisteredCandidate* c = registry_->Find(candidate);
  if (c == nullptr) return UnknownCandidate(candidate);
  const Bucket bucket = BucketOf(p);
  if (std::string gap = registry_->CoverageGap(*c, p); !gap.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("candidate \"", candidate,
                                                      "\" does not cover ", p.ToString(), " (bucket ",
                                                      bucket.ToString(), "): ", gap));
  }
  return store_->PutForce(arbiter::Force{fingerprint_, p.dtype, bucket, candidate, reason, NowUnix()});
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
  verdict_cache_->Clear();
  return removed;
}

absl::StatusOr<std::vector<QuarantineEntry>> Arbiter::ListQuarantine() const {
  return quarantine_->List();
}

absl::StatusOr<int> Arbiter::ClearQuarantine(const std::string& candidate) {
  if (!candidate.empty() && registry_->Find(candidate) == nullptr) {
    return UnknownCandidate(candidate);
  }
  return quarantine_->Clear(candidate);
}

absl::Status Arbiter::Quarantine(const std::string& candidate, const QuarantineScope& scope,
                                 const std::string& reason) {
  const RegisteredCandidate* c = registry_->Find(candidate);
  if (c == nullptr) return UnknownCandidate(candidate);
  return quarantine_->Add(candidate, c->spec.version, scope, reason);
}

}  // namespace arbiter
