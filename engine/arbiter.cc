#include "engine/arbiter.h"

#include <unistd.h>

#include <chrono>
#include <map>
#include <string_view>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/refinement.h"
#include "engine/selection_policy.h"
#include "spdlog/spdlog.h"

namespace arbiter {

namespace {

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
  a->hot_shapes_ =
      std::make_unique<HotShapes>(options.refine.hot_after, options.refine.hot_capacity);
  ASSIGN_OR_RETURN(a->forces_, Forces::Create(*a->store_, a->fingerprint_));
  a->node_verdicts_ = std::make_unique<NodeVerdicts>();
  a->selections_ = std::make_unique<SelectionCache>(
      options.selection_cache_entries,
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(options.selection_cache_seconds)));
  a->dispatcher_ = std::make_unique<Dispatcher>(*a->backend_, *a->streams_, *a->quarantine_,
                                                *a->verdict_cache_, options.verify_fraction);
  a->regions_ = std::make_unique<RegionTable>(*a->backend_, a->options_.regions);
  a->tensors_ = std::make_unique<TensorTable>(*a->backend_, *a->streams_, a->options_.tensors);
  a->completions_ = std::make_unique<CompletionTable>(*a->backend_);
  if (!options.tuning_intent_file.empty()) {
    ASSIGN_OR_RETURN(a->journal_, IntentJournal::Open(options.tuning_intent_file));
    RETURN_IF_ERROR(a->QuarantineLeftover());
  }
  TunerOptions tuner;
  tuner.measure = options.measure;
  tuner.noise = options.noise;
  tuner.refine = options.refine;
  tuner.max_queued = options.tuning_queue;
  tuner.max_queued_per_peer = options.tuning_queue_per_peer;
  tuner.hang_seconds = options.tuning_hang_seconds;
  tuner.on_fault = options.on_fault;
  // A hot shape whose refinement failed or was dropped counts from zero again, so it
  // is tried again once hot again (the Tuner goes before hot_shapes_).
  tuner.on_refinement_lost = [hot = a->hot_shapes_.get()](const Problem& p) { hot->Forget(p); };
  a->tuner_ = std::make_unique<Tuner>(tuner, *a->backend_, *a->registry_, *a->store_,
                                      *a->node_verdicts_, *a->streams_, *a->quarantine_,
                                      *a->verdict_cache_, a->journal_.get());
  Arbiter* self = a.get();
  a->subscription_ =
      a->store_->Subscribe([self](const StoreChange& change) { self->OnStoreChange(change); });
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

namespace {
// The options with the device memory limit filled in from the device where unset.
ArbiterOptions WithDeviceLimits(ArbiterOptions options, const DeviceInfo& device) {
  if (options.limits.max_device_bytes <= 0) options.limits.max_device_bytes = device.memory_bytes;
  if (options.regions.max_bytes_per_peer <= 0) options.regions.max_bytes_per_peer = device.memory_bytes;
  if (options.regions.max_host_bytes_per_peer <= 0) {
    // A quarter of the host's memory: a GPU daemon page-locks what it is given.
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    options.regions.max_host_bytes_per_peer =
        pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 4 : int64_t{1} << 30;
  }
  if (options.tensors.max_resident_bytes <= 0) {
    options.tensors.max_resident_bytes = device.memory_bytes > 0 ? device.memory_bytes / 4 : int64_t{1} << 30;
  }
  return options;
}
}  // namespace

Arbiter::Arbiter(const ArbiterOptions& options, std::unique_ptr<Backend> backend,
                 std::unique_ptr<Registry> registry, std::unique_ptr<VerdictStore> store)
    : options_(WithDeviceLimits(options, backend->info())),
      backend_(std::move(backend)),
      registry_(std::move(registry)),
      store_(std::move(store)),
      fingerprint_(backend_->info().Fingerprint()) {}

Arbiter::~Arbiter() {
  subscription_.reset();
  tuner_.reset();
}

void Arbiter::OnStoreChange(const StoreChange& change) {
  if (change.what != StoreChange::What::kEverything && change.fingerprint != fingerprint_) return;
  spdlog::info("fleet store change by {}: {} {} {}", change.origin, StoreChangeWhatName(change.what),
                change.dtype ? DTypeName(*change.dtype) : "*",
                change.bucket ? change.bucket->ToString() : "*");
  switch (change.what) {
    case StoreChange::What::kVerdicts: {
      const auto covered = [&](const BucketKey& key) {
        return change.Covers(fingerprint_, key.dtype, key.bucket);
      };
      verdict_cache_->DropIf(covered);
      // Another daemon may have invalidated a refinement this one counted past hot.
      hot_shapes_->ForgetHot(covered);
      tuner_->OnVerdictsChanged();
      break;
    }
    case StoreChange::What::kForces:
      forces_->MarkStale();
      break;
    case StoreChange::What::kQuarantine:
      quarantine_->MarkStale();
      break;
    case StoreChange::What::kEverything:
      // Re-read before serving, but kept for while the store cannot be read: this
      // arrives when notifications were lost, often before the store answers again.
      verdict_cache_->MarkUnconfirmed();
      tuner_->OnVerdictsChanged();
      forces_->MarkStale();
      quarantine_->MarkStale();
      break;
  }
  // Selections remembered before this change are never served after it.
  verdict_cache_->Invalidate();
}

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
  ASSIGN_OR_RETURN(std::shared_ptr<const Selection> s, SelectShared(p, options));
  return *s;
}

absl::StatusOr<std::shared_ptr<const Selection>> Arbiter::SelectShared(
    const Problem& p, const SelectOptions& options) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  return SelectValid(p, options);
}

std::shared_ptr<const Selection> Arbiter::Remembered(const Problem& p, Determinism required) {
  std::shared_ptr<const Selection> remembered =
      selections_->Get({p, required}, verdict_cache_->generation());
  if (remembered && observer_) observer_->OnSelection(p, *remembered, true);
  return remembered;
}

absl::StatusOr<std::shared_ptr<const Selection>> Arbiter::SelectValid(
    const Problem& p, const SelectOptions& options) {
  const SelectionCache::Key key{p, options.required};
  // Read before anything the decision depends on (VerdictCache says why).
  const uint64_t generation = verdict_cache_->generation();
  if (std::shared_ptr<const Selection> remembered = selections_->Get(key, generation)) {
    if (observer_) observer_->OnSelection(p, *remembered, true);
    return remembered;
  }
  bool rememberable = false;
  ASSIGN_OR_RETURN(Selection decided, Decide(p, options, &rememberable));
  auto shared = std::make_shared<const Selection>(std::move(decided));
  if (rememberable) selections_->Put(key, generation, shared);
  return shared;
}

std::optional<Verdict> Arbiter::StoredVerdict(const Problem& p, bool* held) {
  *held = false;
  const BucketKey key = BucketKeyOf(p);
  if (std::optional<Verdict> cached = verdict_cache_->Get(key)) return cached;
  // The bucket's verdict with its refinements and split halves.
  absl::StatusOr<Verdict> v = absl::NotFoundError("no verdict");
  if (absl::StatusOr<std::optional<Verdict>> loaded = LoadBucketVerdicts(*store_, fingerprint_, key);
      !loaded.ok()) {
    v = loaded.status();
  } else if (*loaded) {
    v = **std::move(loaded);
  }
  const bool unreadable = !v.ok() && !absl::IsNotFound(v.status());
  if (unreadable) {
    spdlog::debug("verdict of {} unreadable: {}", key.ToString(), v.status().ToString());
  }
  const bool set_aside =
      !node_verdicts_->empty() && node_verdicts_->SetAside(key, v.ok() ? &*v : nullptr);
  if (set_aside) {
    v = absl::NotFoundError("set aside");
    if (std::optional<Verdict> own = node_verdicts_->Get(key)) v = *std::move(own);
  }
  if (!v.ok()) {
    if (std::optional<Verdict> pending = tuner_->Pending(key)) v = *std::move(pending);
  }
  if (!v.ok()) {
    // The store cannot say: serve what this daemon held (unconfirmed since notifications
    // were lost); when the store answers that there is none, forget it.
    if (unreadable && !set_aside) {
      std::optional<Verdict> kept = verdict_cache_->Held(key);
      *held = kept.has_value();
      return kept;
    }
    verdict_cache_->Drop(key);
    return std::nullopt;
  }
  verdict_cache_->Put(key, *v);
  return *std::move(v);
}

absl::StatusOr<Selection> Arbiter::Decide(const Problem& p, const SelectOptions& options,
                                          bool* rememberable) {
  quarantine_->Refresh();
  std::string why_none;
  const std::vector<const RegisteredCandidate*> eligible =
      Eligible(*registry_, *quarantine_, p, &why_none);
  if (eligible.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate can run ", p.ToString(), " on this device: ", why_none));
  }
  const Bucket bucket = BucketOf(p);

  // 1. An operator's force: of this exact shape first, then of its bucket.
  for (const arbiter::Force& force : forces_->For(p)) {
    if (std::optional<Selection> s = SelectForced(force, p, eligible, options.required)) {
      if (observer_) observer_->OnSelection(p, *s, true);
      *rememberable = true;
      return *std::move(s);
    }
    spdlog::warn("force of {} for {} {}{}{} not applied: not eligible for {} or below {}",
                 force.candidate, DTypeName(p.dtype), bucket.ToString(),
                 force.scope.whole() ? "" : " shape ", force.scope.ToString(), p.ToString(),
                 DeterminismName(options.required));
  }

  // 2. A stored verdict that raced exactly the candidates (and versions) eligible now.
  const std::string raced = RacedSet(eligible);
  bool held = false;
  const std::optional<Verdict> stored = StoredVerdict(p, &held);
  if (stored && stored->candidates == raced) {
    // The most specific of the bucket's verdicts: a refinement of `p`, a split half, the bucket's.
    const Verdict* served = MostSpecific(*stored, p);
    absl::StatusOr<Selection> s =
        SelectFromVerdict(*served, p, eligible, options.required, options_.noise);
    if (served != &*stored && (!s.ok() || s->source != VerdictSource::kMeasured)) {
      // Nothing it raced meets the request: the bucket's own figures decide.
      served = &*stored;
      s = SelectFromVerdict(*stored, p, eligible, options.required, options_.noise);
    }
    if (s.ok() && observer_) observer_->OnSelection(p, *s, true);
    // Served from figures taken at another shape: often enough, `p` gets its own.
    // Until then the answer is not remembered, so that every use is counted.
    bool counting = false;
    if (s.ok() && served->scope.kind != VerdictScope::Kind::kShape && !(served->measured == p) &&
        EffectivePolicy(options_.tuning, options.tuning) != TuningPolicy::kOff) {
      const int64_t uses = hot_shapes_->Count(p);
      if (uses > 0 && uses == options_.refine.hot_after) tuner_->EnqueueRefinement(p);
      counting = uses > 0 && uses < options_.refine.hot_after;
    }
    *rememberable = s.ok() && !counting && !held;
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
  ASSIGN_OR_RETURN(const std::shared_ptr<const Selection> selection, SelectValid(p, options));
  return dispatcher_->Run(p, *selection, options.call(), a, b);
}

namespace {

// What operand `name` ("a", "b" or "c") of `p` holds, for an error message:
// "A (m*k = 12*8 f32)".
std::string OperandWhat(const Problem& p, std::string_view name) {
  const auto [operand, rows, cols, dims] = name == "a"   ? std::tuple{"A", p.m, p.k, "m*k"}
                                           : name == "b" ? std::tuple{"B", p.k, p.n, "k*n"}
                                                         : std::tuple{"C", p.m, p.n, "m*n"};
  return absl::StrCat(operand, " (", dims, " = ", rows, "*", cols, " ", DTypeName(p.dtype), ")");
}

}  // namespace

absl::StatusOr<Operand> Arbiter::Resolve(const Peer& peer, const OperandRef& ref,
                                         const char* name, const Problem& p, size_t bytes,
                                         bool written,
                                         std::vector<std::shared_ptr<const void>>* hold) {
  void* base = nullptr;
  int64_t size = 0;
  bool host_side = false;  // a host region on a device backend: copied over the bus
  // Built only for an error: this runs on every zero-copy Matmul.
  auto where = [&] {
    return absl::StrCat(ref.target == OperandRef::Target::kRegion ? "region" : "tensor", " \"",
                        ref.id, "\" (", size, " bytes)");
  };
  if (ref.target == OperandRef::Target::kRegion) {
    ASSIGN_OR_RETURN(std::shared_ptr<const Region> region, regions_->Find(peer, ref.id));
    base = region->memory->data();
    size = region->info.bytes;
    host_side = region->memory->host_side();
    hold->push_back(std::move(region));
  } else {
    if (written) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": tensor \"", ref.id, "\": a resident tensor is never written; name a region for ", name));
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor, tensors_->Find(peer, ref.id));
    base = tensor->memory->data();
    size = tensor->info.bytes;
    hold->push_back(std::move(tensor));
  }
  const int64_t need = static_cast<int64_t>(bytes);
  if (need > size) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", where(), " is smaller than the ",
                                                   need, " bytes of ", OperandWhat(p, name)));
  }
  if (ref.offset < 0 || need > size - ref.offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", where(), ", offset ", ref.offset, ": ", need, " bytes of ", OperandWhat(p, name),
        " must lie within it (expected 0 <= offset <= ", size - need, ")"));
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(ref.offset);
  if (address % kOperandAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", where(), ", offset ", ref.offset, ": ", host_side ? "the" : "the device",
        " address must be a multiple of ",
        kOperandAlignment, " bytes; it is ", address % kOperandAlignment, " past one"));
  }
  if (host_side) return Operand{.host_side = reinterpret_cast<const void*>(address), .bytes = bytes};
  return Operand{.device = reinterpret_cast<void*>(address), .bytes = bytes};
}

absl::StatusOr<DispatchResult> Arbiter::Dispatch(const Problem& p, const SelectOptions& options,
                                                 const Peer& peer,
                                                 const MatmulOperands& operands) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  DispatchIo io;
  io.hold.reserve(3);  // a region or tensor per operand at most
  if (operands.a_ref) {
    ASSIGN_OR_RETURN(io.a, Resolve(peer, *operands.a_ref, "a", p, p.a_bytes(), false, &io.hold));
  } else {
    const size_t bytes = TotalBytes(operands.a);
    RETURN_IF_ERROR(CheckOperandSizes(p, bytes, p.b_bytes()));
    io.a = Operand{.host = operands.a, .bytes = bytes};
  }
  if (operands.b_ref) {
    ASSIGN_OR_RETURN(io.b, Resolve(peer, *operands.b_ref, "b", p, p.b_bytes(), false, &io.hold));
  } else {
    const size_t bytes = TotalBytes(operands.b);
    RETURN_IF_ERROR(CheckOperandSizes(p, p.a_bytes(), bytes));
    io.b = Operand{.host = operands.b, .bytes = bytes};
  }
  if (operands.c_ref) {
    ASSIGN_OR_RETURN(const Operand c,
                     Resolve(peer, *operands.c_ref, "c", p, p.c_bytes(), true, &io.hold));
    if (c.host_side != nullptr && operands.complete_by_event) {
      return absl::InvalidArgumentError(absl::StrCat(
          "completion EVENT: c: \"", operands.c_ref->id, "\" is host memory, which the daemon "
          "copies C back into before it replies; EVENT needs C in a region of device memory"));
    }
    io.c_device = c.device;
    io.c_host = const_cast<void*>(c.host_side);
    // A kernel reading what it writes gives garbage: C shares no byte with A or B
    // (one rule for device and host regions).
    const auto begin = [](const Operand& o) {
      return reinterpret_cast<uintptr_t>(o.device != nullptr ? o.device : o.host_side);
    };
    for (const auto& [name, o] : {std::pair<const char*, const Operand*>{"a", &io.a}, {"b", &io.b}}) {
      if (begin(*o) == 0) continue;
      if (begin(c) < begin(*o) + o->bytes && begin(*o) < begin(c) + c.bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "c: ", p.c_bytes(), " bytes at offset ", operands.c_ref->offset, " of \"",
            operands.c_ref->id, "\" overlap ", name, "; C must share no byte with A or B"));
      }
    }
  } else {
    io.c_host = operands.c_host;
  }
  io.wait_event = operands.wait_event;
  RETURN_IF_ERROR(completions_->Acknowledge(peer, operands.done_event_slots));
  if (operands.complete_by_event && !operands.c_ref) {
    return absl::InvalidArgumentError(
        "completion EVENT: C must be named by c_ref (a region); C sent back in the reply is "
        "complete when the reply arrives");
  }
  // Taken before selecting: a backend without events refuses before any measurement.
  CompletionTable::Claim claim;
  if (operands.complete_by_event) {
    ASSIGN_OR_RETURN(claim, completions_->Take(peer));
    io.events = &claim.events();
    io.event_slot = claim.slot();
  }
  RETURN_IF_ERROR(CheckDeadline(options.deadline, "on arrival"));
  ASSIGN_OR_RETURN(const std::shared_ptr<const Selection> selection, SelectValid(p, options));
  absl::StatusOr<DispatchResult> result = dispatcher_->Run(p, *selection, options.call(), io);
  // Recorded: the slot stays the client's until acknowledged, and keeps the
  // regions until its kernel is done. Not recorded: the claim frees it.
  if (result.ok() && result->by_event) claim.Commit(std::move(io.hold));
  return result;
}

absl::StatusOr<Verdict> Arbiter::Tune(const Problem& p, const CallContext& caller) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  return tuner_->Refine(p, caller, MeasureCall{.remeasure = true});
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
  ASSIGN_OR_RETURN(std::vector<Verdict> verdicts, store_->ListVerdicts(fingerprint_, filter));
  // Transfer: at each shape measured inside a bucket, the bucket's winner against the best there.
  std::map<BucketKey, std::string> winners;
  for (const Verdict& v : verdicts) {
    if (v.scope.whole()) winners[BucketKey{v.dtype, v.bucket}] = v.winner;
  }
  for (Verdict& v : verdicts) {
    auto it = winners.find(BucketKey{v.dtype, v.bucket});
    if (it != winners.end() && !it->second.empty()) v.transfer = TransferOf(v, it->second);
  }
  return verdicts;
}

absl::StatusOr<int64_t> Arbiter::CountVerdicts() const {
  return store_->CountVerdicts(fingerprint_);
}

absl::Status Arbiter::Force(const Problem& p, const std::string& candidate,
                            const std::string& reason, Reach reach, bool exact_shape) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  const RegisteredCandidate* c = registry_->Find(candidate);
  if (c == nullptr) return UnknownCandidate(candidate);
  const Bucket bucket = BucketOf(p);
  if (std::string gap = registry_->CoverageGap(*c, p); !gap.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("candidate \"", candidate,
                                                      "\" does not cover ", p.ToString(), " (bucket ",
                                                      bucket.ToString(), "): ", gap));
  }
  RETURN_IF_ERROR(forces_->Put(
      arbiter::Force{fingerprint_, p.dtype, bucket, candidate, reason, absl::ToUnixSeconds(absl::Now()),
                     exact_shape ? VerdictScope::Shape(p) : VerdictScope{}},
      reach));
  verdict_cache_->Invalidate();
  return absl::OkStatus();
}

absl::StatusOr<bool> Arbiter::Unforce(const Problem& p, Reach reach, bool exact_shape) {
  RETURN_IF_ERROR(ValidateProblem(p, options_.limits));
  ASSIGN_OR_RETURN(const bool removed,
                   forces_->Remove(BucketKeyOf(p),
                                   exact_shape ? VerdictScope::Shape(p) : VerdictScope{}, reach));
  verdict_cache_->Invalidate();
  return removed;
}

absl::StatusOr<std::vector<Forces::Entry>> Arbiter::ListForces() const {
  return forces_->List();
}

absl::StatusOr<int> Arbiter::Invalidate(const InvalidateScope& scope, Reach reach) {
  int removed = 0;
  if (reach == Reach::kFleet) {
    ASSIGN_OR_RETURN(removed, store_->Invalidate(fingerprint_, scope));
  } else {
    // The store's verdicts in scope, read before they are set aside: what this daemon
    // stops serving.
    VerdictFilter filter{scope.dtype, scope.bucket, scope.candidate};
    absl::StatusOr<std::vector<Verdict>> stored = store_->ListVerdicts(fingerprint_, filter);
    removed = node_verdicts_->Invalidate(scope) +
              (stored.ok() ? static_cast<int>(stored->size()) : 0);
  }
  const auto covered = [&](const BucketKey& key) {
    return (!scope.dtype || *scope.dtype == key.dtype) &&
           (!scope.bucket || *scope.bucket == key.bucket);
  };
  verdict_cache_->DropIf(covered);
  // A shape counted hot may have lost its refinement: it counts from zero again.
  hot_shapes_->ForgetHot(covered);
  return removed;
}

absl::StatusOr<std::vector<QuarantineEntry>> Arbiter::ListQuarantine() const {
  return quarantine_->List();
}

absl::StatusOr<int> Arbiter::ClearQuarantine(const std::string& candidate, Reach reach) {
  if (!candidate.empty() && registry_->Find(candidate) == nullptr) {
    return UnknownCandidate(candidate);
  }
  ASSIGN_OR_RETURN(const int removed, quarantine_->Clear(candidate, reach));
  verdict_cache_->Invalidate();
  return removed;
}

absl::Status Arbiter::Quarantine(const std::string& candidate, const QuarantineScope& scope,
                                 const std::string& reason, Reach reach) {
  const RegisteredCandidate* c = registry_->Find(candidate);
  if (c == nullptr) return UnknownCandidate(candidate);
  RETURN_IF_ERROR(quarantine_->Add(candidate, c->spec.version, scope, reason, reach));
  verdict_cache_->Invalidate();
  return absl::OkStatus();
}

}  // namespace arbiter
