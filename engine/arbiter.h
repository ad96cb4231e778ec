// The engine: for each problem, picks the candidate that serves it and runs it.
// Owns the registry, the backend streams, the verdict store and the tuning
// threads. Verdicts come from (in order): a force, a stored measured verdict
// whose raced candidate versions still match the registry, or - on a miss - the
// tuning policy: `sync` measures then answers, `async` answers with the tier
// default (source provisional) and measures in the background, `off` answers
// with the tier default. One measurement per bucket at a time, however many
// requests arrive for it.
//
// Thread-safe: provides internal synchronization.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend.h"
#include "engine/measurer.h"
#include "engine/registry.h"
#include "engine/selection.h"
#include "engine/verdict.h"
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
  ProblemLimits limits;            // checked before any allocation
  size_t max_queue = 64;           // dispatches waiting for a stream; more get RESOURCE_EXHAUSTED
  size_t verdict_cache_entries = 4096;  // verdicts kept in memory in front of the store
  double verify_fraction = 0.0;    // share of dispatches also checked against the reference;
                                   // an out-of-budget result quarantines the candidate for its bucket
};

struct SelectOptions {
  Determinism required = Determinism::kNondeterministic;
  std::optional<TuningPolicy> tuning;  // unset: the daemon's default
  // Dispatch: work not started by then fails DEADLINE_EXCEEDED (checked before selecting
  // and again once a device stream is held); unset: no deadline.
  std::optional<std::chrono::system_clock::time_point> deadline;
};

// What serves a problem, and why.
struct Selection {
  std::string candidate;
  int version = 0;
  VerdictSource source = VerdictSource::kTierDefault;
  Bucket bucket;
  std::string reason;
  std::optional<Verdict> verdict;  // the measured verdict it came from, if any
};

struct DispatchResult {
  std::vector<uint8_t> c;
  Selection selection;
  double device_seconds = 0;  // the kernel alone, by the device timer
};

struct CandidateStatus {
  const RegisteredCandidate* candidate;
  bool eligible = false;  // runs on this device and is not quarantined everywhere
  std::string reason;     // why not
  std::vector<QuarantineEntry> quarantine;
};

// Observes engine events (metrics, logs). Called on engine threads; must be cheap.
class ArbiterObserver {
 public:
  virtual ~ArbiterObserver() = default;
  virtual void OnSelection(const Problem&, const Selection&, bool cache_hit) {}
  virtual void OnDispatch(const Problem&, const Selection&, double device_seconds,
                          const absl::Status& status) {}
  virtual void OnTuning(const Problem&, const Verdict&, double wall_seconds) {}
  virtual void OnQuarantine(const QuarantineEntry&) {}
  // A sampled live dispatch was checked against the reference.
  virtual void OnVerification(const Problem&, const Selection&, double max_rel_error, bool pass) {}
};

class Arbiter {
 public:
  static absl::StatusOr<std::unique_ptr<Arbiter>> Create(const ArbiterOptions& options,
                                                         std::unique_ptr<Backend> backend,
                                                         std::unique_ptr<Registry> registry,
                                                         std::unique_ptr<VerdictStore> store);
  ~Arbiter();  // waits for background tuning
  Arbiter(const Arbiter&) = delete;
  Arbiter& operator=(const Arbiter&) = delete;

  void set_observer(ArbiterObserver* observer) { observer_ = observer; }

  // The candidate that would serve `p`, without running it (may measure, per policy).
  absl::StatusOr<Selection> Select(const Problem& p, const SelectOptions& options);

  // Selects and runs. `a` and `b` hold the operands as stored (row-major).
  absl::StatusOr<DispatchResult> Dispatch(const Problem& p, const SelectOptions& options,
                                          const void* a, size_t a_bytes, const void* b,
                                          size_t b_bytes);

  // Measures the bucket of `p` now (re-measuring over a stored verdict), at `p`'s shape.
  absl::StatusOr<Verdict> Tune(const Problem& p);

  std::vector<CandidateStatus> ListCandidates() const;
  absl::StatusOr<std::vector<Verdict>> ListVerdicts(const VerdictFilter& filter) const;
  // NOT_FOUND for an unknown candidate; FAILED_PRECONDITION when it does not cover p.
  absl::Status Force(const Problem& p, const std::string& candidate, const std::string& reason);
  absl::StatusOr<bool> Unforce(const Problem& p);
  absl::StatusOr<std::vector<arbiter::Force>> ListForces() const;
  absl::StatusOr<int> Invalidate(const InvalidateScope& scope);
  absl::StatusOr<std::vector<QuarantineEntry>> ListQuarantine() const;
  absl::StatusOr<int> ClearQuarantine(const std::string& candidate);
  // NOT_FOUND for an unknown candidate.
  absl::Status Quarantine(const std::string& candidate, const std::string& scope,
                          const std::string& reason);

  // Waits until no background tuning is running (tests, shutdown).
  void WaitIdle();

  const DeviceInfo& device() const { return backend_->info(); }
  const Registry& registry() const { return *registry_; }
  const ArbiterOptions& options() const { return options_; }
  absl::Status Health() const { return backend_->Health(); }
  // Measurements run since start (tests: a restarted daemon measures nothing again).
  int64_t measurements() const { return measurements_.load(); }
  // Dispatches waiting for a device stream now.
  size_t queue_depth() const;

 private:
  class StreamPool;
  struct InFlight;
  Arbiter(const ArbiterOptions& options, std::unique_ptr<Backend> backend,
          std::unique_ptr<Registry> registry, std::unique_ptr<VerdictStore> store);

  // Candidates that may run p on this device (coverage, architecture, quarantine), any
  // determinism, in registration order. `why_none` collects each one's reason when empty.
  std::vector<const RegisteredCandidate*> Eligible(const Problem& p, std::string* why_none) const;
  // "name@version,..." sorted: the set a verdict for p must have raced to be served.
  static std::string RacedSet(const std::vector<const RegisteredCandidate*>& eligible);
  absl::StatusOr<Verdict> MeasureBucket(const Problem& p);
  // Measures p's bucket once however many callers ask; the others wait for that result.
  absl::StatusOr<Verdict> MeasureOnce(const Problem& p);
  void EnqueueTuning(const Problem& p);
  // Whether a verdict that would be served for p (same raced name@version set) is stored.
  bool HasFreshVerdict(const Problem& p);
  void TuningLoop();
  absl::StatusOr<Selection> FromVerdict(const Verdict& v, const Problem& p,
                                        const std::vector<const RegisteredCandidate*>& eligible,
                                        Determinism required) const;
  absl::StatusOr<Selection> TierDefaultSelection(
      const Problem& p, const std::vector<const RegisteredCandidate*>& eligible,
      Determinism required, VerdictSource source, const std::string& why) const;
  bool IsQuarantined(const CandidateSpec& c, DType dtype, const Bucket& bucket) const;
  absl::Status RefreshQuarantine();
  std::optional<Verdict> CachedVerdict(const std::string& key);
  void CacheVerdict(const std::string& key, const Verdict& v);
  void ClearVerdictCache();
  static std::string BucketKey(DType dtype, const Bucket& b);
  bool SampleForVerification();
  // Checks a live dispatch's C (still on the device) against the reference.
  absl::Status VerifyDispatch(const Problem& p, const Selection& sel, const CandidateMember& member,
                              Stream& stream, const Buffer& a, const Buffer& b,
                              const std::vector<uint8_t>& c);

  const ArbiterOptions options_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<VerdictStore> store_;
  std::unique_ptr<StreamPool> streams_;
  const std::string fingerprint_;
  ArbiterObserver* observer_ = nullptr;
  std::atomic<int64_t> measurements_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;  // signalled when a measurement ends or tuning work arrives
  std::map<std::string, std::shared_ptr<InFlight>> in_flight_;  // GUARDED_BY(mu_); key: BucketKey
  std::vector<QuarantineEntry> quarantine_;                     // GUARDED_BY(mu_); the store's, cached
  std::vector<Problem> tune_queue_;                             // GUARDED_BY(mu_); async misses, deduped
  bool tuning_busy_ = false;                                    // GUARDED_BY(mu_)
  bool stopping_ = false;                                       // GUARDED_BY(mu_)
  std::map<std::string, Verdict> verdict_cache_;                // GUARDED_BY(mu_); bounded
  std::thread tuning_thread_;
  std::atomic<uint64_t> dispatch_counter_{0};
};

}  // namespace arbiter
