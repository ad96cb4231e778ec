// The engine: for each problem, picks the candidate that serves it and runs it.
// Verdicts come from (in order): a force (of the exact shape, else of its
// bucket), a stored measured verdict whose raced
// candidate versions still match the registry, or - on a miss - the tuning
// policy: `sync` measures then answers, `async` answers with the tier default
// (source provisional) and measures in the background, `off` answers with the
// tier default. A request may ask for less tuning than the daemon's policy
// (sync > async > off), never more. One measurement per bucket at a time,
// however many requests arrive for it, on the Tuner's one measuring thread; a
// miss that finds the tuning queue full (or its peer's share of it) is answered
// with the tier default, source tier_default, saying why. Of a bucket's stored
// verdicts the most specific serves: a refinement of the exact shape, else the
// split half holding it, else the bucket's own; a shape served from another
// shape's figures `refine.hot_after` times is refined in the background, behind
// every other measurement (never under `off`); until then its answer is not
// remembered (SelectionCache), so each use counts.
//
// The Arbiter is the engine's front door and composes its rooms: the serving
// policy (selection_policy.h), the Tuner (measurement, background tuning), the
// Dispatcher (running a selection), the Quarantine, the VerdictCache, the
// SelectionCache (a Select on a stored verdict is a lookup) and the StreamPool. Each public method that takes a Problem validates it once, here;
// nothing behind this boundary validates it again.
//
// On a shared store (PostgreSQL) the Arbiter follows the fleet: it subscribes to
// the store's change notifications and drops what another daemon changed -
// verdicts from the cache, forces and quarantine entries to be re-read - so an
// operator's change through any daemon reaches every one at once. Admin changes
// are fleet-wide (made in the store; refused when the store cannot make them
// durable) or, with Reach::kNode, this daemon's alone. While the store cannot
// be reached, selection serves what it holds - the verdicts cached before
// notifications were lost included - and treats an unreadable verdict it does
// not hold as a miss.
//
// Ownership: owns the backend, registry, verdict store and every room; never
// owns its observer, which must outlive it.
// Thread-safe: provides internal synchronization (each room synchronizes itself).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend.h"
#include "engine/call_context.h"
#include "engine/completion_table.h"
#include "engine/dispatcher.h"
#include "engine/intent_journal.h"
#include "engine/forces.h"
#include "engine/hot_shapes.h"
#include "engine/measurer.h"
#include "engine/node_verdicts.h"
#include "engine/observer.h"
#include "engine/quarantine.h"
#include "engine/peer.h"
#include "engine/refinement.h"
#include "engine/region_table.h"
#include "engine/registry.h"
#include "engine/selection.h"
#include "engine/selection_cache.h"
#include "engine/stream_pool.h"
#include "engine/tensor_table.h"
#include "engine/tuner.h"
#include "engine/verdict.h"
#include "engine/verdict_cache.h"
#include "engine/verdict_store.h"

namespace arbiter {

enum class TuningPolicy { kSync = 1, kAsync = 2, kOff = 3 };
const char* TuningPolicyName(TuningPolicy p);
std::optional<TuningPolicy> ParseTuningPolicy(std::string_view s);

struct ArbiterOptions {
  TuningPolicy tuning = TuningPolicy::kSync;  // default policy on a verdict miss
  int workers = 1;                 // device streams for dispatch and tuning
  MeasureOptions measure;          // how a bucket is measured
  NoisePolicy noise;               // when a challenger displaces the incumbent
  RefineOptions refine;            // exact-shape refinement and splits (refinement.h)
  ProblemLimits limits;            // checked before any allocation; max_device_bytes 0: the device's memory
  size_t max_queue = 64;           // dispatches waiting for a stream; more get RESOURCE_EXHAUSTED
  size_t verdict_cache_entries = 4096;  // verdicts kept in memory in front of the store
  size_t selection_cache_entries = 65536;  // Select answers remembered per exact problem
  // How long a remembered Select answer is served without looking again: bounds
  // how late a change made by another daemon sharing the store is seen.
  double selection_cache_seconds = 1.0;
  double verify_fraction = 0.0;    // share of dispatches also checked against the reference;
                                   // an out-of-budget result quarantines the candidate for its bucket
  RegionQuota regions;             // client memory mapped per peer; bytes 0: the device's memory
  TensorLimits tensors;            // resident tensors; max_resident_bytes 0: a quarter of the device's memory
  size_t tuning_queue = 64;        // buckets queued or being measured; a miss past it is
                                   // answered with the tier default, a Tune refused
  size_t tuning_queue_per_peer = 8;  // of those, asked for by one peer
  double tuning_hang_seconds = 300;  // a candidate under measurement with no progress this long
                                     // has hung (see on_fault)
  std::string tuning_intent_file;  // records which candidate runs while measuring, so a restart
                                   // after a crash quarantines it; empty: none kept
  // Called when a candidate hung or faulted the device while measured (the engine
  // cannot go on; the intent file names it). Unset: logged only.
  std::function<void(const absl::Status&)> on_fault;
};

// An operand a Matmul names instead of carrying (the wire's OperandRef).
struct OperandRef {
  enum class Target { kRegion, kTensor };
  Target target = Target::kRegion;
  std::string id;       // the region id or tensor handle
  int64_t offset = 0;   // bytes from its start
};

// Each of A, B and C: inline (host bytes) or a ref (unset `*_ref`).
struct MatmulOperands {
  std::optional<OperandRef> a_ref, b_ref, c_ref;
  // Inline A and B: host bytes in one piece or several (a gRPC message's
  // slices), gathered straight into the device buffers. The caller's; they
  // outlive the dispatch.
  std::vector<HostPiece> a, b;
  void* c_host = nullptr;    // where inline C goes (c_bytes()); null: DispatchResult::c
  std::string wait_event;    // a shared event to wait on before reading A and B; empty: none
  // Completion by event (C in a region): one of the peer's CompletionTable
  // slots is recorded after the kernel and named in DispatchResult::event_slot.
  bool complete_by_event = false;
  // The peer's slots it has waited on, freed (CompletionTable::Acknowledge)
  // before anything else is done.
  std::vector<int> done_event_slots;
};

// Device addresses must be multiples of this: every candidate is measured on
// buffers aligned so, and vector loads, cp.async and TMA rely on it.
inline constexpr int64_t kOperandAlignment = 256;

struct SelectOptions {
  Determinism required = Determinism::kNondeterministic;
  // Unset: the daemon's policy. A request may lower it (sync > async > off), never raise it.
  std::optional<TuningPolicy> tuning;
  // Work not started by then fails DEADLINE_EXCEEDED (checked before selecting, while
  // waiting for a measurement or a device stream, and once a stream is held); unset: none.
  Deadline deadline;
  // True once the client went away (the server wires gRPC's ServerContext::IsCancelled):
  // its waits end at once with CANCELLED. Unset: never.
  std::function<bool()> cancelled;
  // Who asked (address without port): the tuning queue's per-peer limit. Empty: nobody.
  std::string peer;

  CallContext call() const { return CallContext{deadline, cancelled, peer}; }
};

// The policy applied to a miss: the request's when it asks for less tuning than the daemon's.
TuningPolicy EffectivePolicy(TuningPolicy daemon, std::optional<TuningPolicy> request);

struct CandidateStatus {
  const RegisteredCandidate* candidate;
  bool eligible = false;  // runs on this device and is not quarantined everywhere
  std::string reason;     // why not
  std::vector<QuarantineEntry> quarantine;
};

class Arbiter {
 public:
  static absl::StatusOr<std::unique_ptr<Arbiter>> Create(const ArbiterOptions& options,
                                                         std::unique_ptr<Backend> backend,
                                                         std::unique_ptr<Registry> registry,
                                                         std::unique_ptr<VerdictStore> store);
  ~Arbiter();  // stops tuning and waits for the measurement in progress
  Arbiter(const Arbiter&) = delete;
  Arbiter& operator=(const Arbiter&) = delete;

  // Set before serving; not synchronized.
  void set_observer(ArbiterObserver* observer);

  // The candidate that would serve `p`, without running it (may measure, per policy).
  absl::StatusOr<Selection> Select(const Problem& p, const SelectOptions& options);
  // The same, shared: on a stored verdict or a force, the remembered answer
  // itself (SelectionCache), without copying it.
  absl::StatusOr<std::shared_ptr<const Selection>> SelectShared(const Problem& p,
                                                                const SelectOptions& options);
  // Only the remembered answer (SelectionCache): what SelectShared would return
  // for `p` and `required` without deciding anything - a lookup that reads no
  // store and takes no lock that measurement or dispatch hold. Null when there
  // is none (never remembered, or stale since); then SelectShared decides. An
  // invalid problem is never remembered.
  std::shared_ptr<const Selection> Remembered(const Problem& p, Determinism required);

  // Selects and runs. `a` and `b` hold the operands as stored (row-major).
  absl::StatusOr<DispatchResult> Dispatch(const Problem& p, const SelectOptions& options,
                                          const void* a, size_t a_bytes, const void* b,
                                          size_t b_bytes);
  // The same for operands inline or named by ref, the refs resolved for `peer`:
  // each is checked - owned by `peer`, offset + bytes within its region or
  // tensor, the device address aligned to kOperandAlignment, C overlapping
  // neither A nor B, no tensor written - before anything is selected or run,
  // with INVALID_ARGUMENT (or NOT_FOUND for a ref `peer` does not own) naming
  // the operand, the region or tensor, the offset, the size and what was expected.
  absl::StatusOr<DispatchResult> Dispatch(const Problem& p, const SelectOptions& options,
                                          const Peer& peer, const MatmulOperands& operands);

  // Client memory mapped for zero-copy operands, and resident tensors.
  RegionTable& regions() { return *regions_; }
  TensorTable& tensors() { return *tensors_; }
  // Each peer's events for completion by event.
  CompletionTable& completions() { return *completions_; }

  // Measures now, whatever the tuning policy (an operator's request), while `caller`
  // waits: `p`'s own verdict when its bucket has a fresh verdict measured at another
  // shape (a refinement, Tuner::Refine), else the bucket at `p`'s shape (re-measuring
  // over a stored verdict). RESOURCE_EXHAUSTED when the tuning queue is full.
  absl::StatusOr<Verdict> Tune(const Problem& p, const CallContext& caller = {});

  std::vector<CandidateStatus> ListCandidates() const;
  absl::StatusOr<std::vector<Verdict>> ListVerdicts(const VerdictFilter& filter) const;
  // Verdicts stored for this device, counted without loading them.
  absl::StatusOr<int64_t> CountVerdicts() const;
  // Pins p's bucket to `candidate`, or with `exact_shape` p alone (served before the
  // bucket's force and verdicts). NOT_FOUND for an unknown candidate;
  // FAILED_PRECONDITION when it does not cover p.
  absl::Status Force(const Problem& p, const std::string& candidate, const std::string& reason,
                     Reach reach = Reach::kFleet, bool exact_shape = false);
  // Removes the force of p's bucket, or with `exact_shape` p's own; whether there was one.
  absl::StatusOr<bool> Unforce(const Problem& p, Reach reach = Reach::kFleet,
                               bool exact_shape = false);
  // Node-local forces first, then the store's (read now).
  absl::StatusOr<std::vector<Forces::Entry>> ListForces() const;
  // Fleet: removes the store's verdicts in scope. Node: sets them aside for this daemon
  // alone, which measures those buckets again and keeps what it measures to itself.
  // Returns the number of verdicts removed or set aside.
  absl::StatusOr<int> Invalidate(const InvalidateScope& scope, Reach reach = Reach::kFleet);
  absl::StatusOr<std::vector<QuarantineEntry>> ListQuarantine() const;
  absl::StatusOr<int> ClearQuarantine(const std::string& candidate, Reach reach = Reach::kFleet);
  // NOT_FOUND for an unknown candidate.
  absl::Status Quarantine(const std::string& candidate, const QuarantineScope& scope,
                          const std::string& reason, Reach reach = Reach::kFleet);

  // Waits until no tuning is queued or running (tests).
  void WaitIdle() { tuner_->WaitIdle(); }

  // Shutdown, in steps. StopTuning refuses new measurements, drops the queued ones
  // and stops the running one at its next checkpoint; returns at once.
  void StopTuning() { tuner_->Shutdown(); }
  // Waits for the running measurement to stop, until `deadline`; false when it is
  // still inside a kernel then.
  bool WaitTuningStopped(std::chrono::steady_clock::time_point deadline) {
    return tuner_->WaitStopped(deadline);
  }
  // The process exits without waiting for the measurement still running: its
  // candidate is not blamed on restart. The Arbiter must then not be destroyed.
  void AbandonTuning() { tuner_->Abandon(); }

  const DeviceInfo& device() const { return backend_->info(); }
  // What RegisterRegion can map on this device (Backend::RegionKinds).
  std::vector<RegionKind> RegionKinds() const { return backend_->RegionKinds(); }
  // Host memory the device copies to and from without staging (Backend::host_allocator).
  HostAllocator host_allocator() const { return backend_->host_allocator(); }
  const Registry& registry() const { return *registry_; }
  const ArbiterOptions& options() const { return options_; }
  absl::Status Health() const { return backend_->Health(); }
  // OK while the verdict store answers; UNAVAILABLE, saying why, while it cannot be
  // reached (the engine keeps serving what it holds).
  absl::Status StoreHealth() const { return store_->Health(); }
  // Verdicts measured while the store was down, waiting to be written back.
  size_t pending_store_writes() const { return tuner_->pending_writes(); }
  // Measurements run since start (tests: a restarted daemon measures nothing again).
  int64_t measurements() const { return tuner_->measurements(); }
  // Dispatches waiting for a device stream now.
  size_t queue_depth() const { return streams_->waiting(); }
  // Buckets queued or being measured now.
  size_t tuning_queued() const { return tuner_->queued(); }

 private:
  Arbiter(const ArbiterOptions& options, std::unique_ptr<Backend> backend,
          std::unique_ptr<Registry> registry, std::unique_ptr<VerdictStore> store);

  // Select for a problem already validated: the remembered answer when there is
  // one, else decided (and remembered when a force or stored verdict decided it).
  absl::StatusOr<std::shared_ptr<const Selection>> SelectValid(const Problem& p,
                                                               const SelectOptions& options);
  absl::StatusOr<Selection> Decide(const Problem& p, const SelectOptions& options,
                                   bool* rememberable);
  // A ref's device address, checked (see Dispatch); `hold` keeps its region or tensor alive.
  absl::StatusOr<Operand> Resolve(const Peer& peer, const OperandRef& ref, const char* name,
                                  const Problem& p, size_t bytes, bool written,
                                  std::vector<std::shared_ptr<const void>>* hold);
  // The bucket's verdict, through the cache: the store's, or this daemon's own where
  // it set the store's aside; nullopt when there is none. While the store cannot
  // answer: the verdict this daemon held, if any, with `*held` set (not to be
  // remembered: the store is asked again next time).
  std::optional<Verdict> StoredVerdict(const Problem& p, bool* held);
  // Another daemon (or this one) changed the shared store: drop what it covers.
  void OnStoreChange(const StoreChange& change);
  // A previous process died measuring (the journal's leftover intent): quarantines
  // the candidate that was running, then clears the journal.
  absl::Status QuarantineLeftover();

  const ArbiterOptions options_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<VerdictStore> store_;
  const std::string fingerprint_;
  ArbiterObserver* observer_ = nullptr;
  std::unique_ptr<IntentJournal> journal_;  // null without tuning_intent_file
  // The rooms, built by Create in this order and destroyed in reverse: the
  // Tuner's thread stops before anything it borrows goes.
  std::unique_ptr<StreamPool> streams_;
  std::unique_ptr<arbiter::Quarantine> quarantine_;
  std::unique_ptr<VerdictCache> verdict_cache_;
  std::unique_ptr<HotShapes> hot_shapes_;  // shapes served from another shape's figures
  std::unique_ptr<Forces> forces_;
  std::unique_ptr<NodeVerdicts> node_verdicts_;
  std::unique_ptr<SelectionCache> selections_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<RegionTable> regions_;
  std::unique_ptr<TensorTable> tensors_;
  std::unique_ptr<CompletionTable> completions_;  // after regions_: its slots hold regions
  std::unique_ptr<Tuner> tuner_;
  std::unique_ptr<StoreSubscription> subscription_;  // last: ends before any room goes
};

}  // namespace arbiter
