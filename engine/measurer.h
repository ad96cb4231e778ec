// Measures one bucket on a backend: fresh random operands of the requested
// shape (never zeros), then each candidate in three phases - checked by the
// oracle on poisoned output; its determinism claim checked by running it again
// (and, for batch_invariant, at a smaller M); then timed: warm-up, cold cache
// before every sample, each sample by the device timer, repeated until the
// median is stable or the candidate's time budget (host wall time) is spent.
// A candidate that fails, errors or cannot be timed is recorded with its state
// and reason - never as a latency.
//
// The caller may pass MeasureHooks: told which candidate is about to launch
// (before any of its kernels runs in each phase) and asked, between candidates
// and between timed repeats, whether to go on. A measurement that holds the
// stream longer than its bucket budget stops there and records what it has.
//
// Not thread-safe: one Measurer per worker stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/backend.h"
#include "engine/registry.h"
#include "engine/verdict.h"

namespace arbiter {

struct MeasureOptions {
  int warmup_runs = 2;              // untimed runs before sampling (module load, caches, handles)
  int min_samples = 5;              // at least this many timed samples
  int max_samples = 50;             // at most this many
  double stable_spread = 0.02;      // stop once IQR/median of the samples is below this
  double budget_seconds = 2.0;      // per candidate: stop sampling once this much wall time
                                    // has passed (samples are device time; the budget is not)
  double bucket_budget_seconds = 30.0;  // all candidates of a bucket: time holding the stream
                                        // from the first launch, less time yielded in
                                        // MeasureHooks::Checkpoint; once spent, the candidate
                                        // being timed keeps its samples (at least one) and the
                                        // rest are unmeasured with the reason
  bool cold_cache = true;           // flush the last-level cache before each sample
  uint64_t seed = 0;                // operand seed; 0 picks a fresh one per measurement
  bool check_determinism = true;    // rerun to check run_to_run / batch_invariant claims
};

// Robust statistics of device-time samples.
struct SampleStats {
  double median = 0;
  double spread = 0;  // (q3 - q1) / median
  int count = 0;
};
SampleStats Summarize(std::vector<double> samples);

// Result of measuring a candidate; `claim_violation` is set (with evidence in
// result.reason) when a determinism claim failed: the arbiter quarantines it.
struct Measurement {
  CandidateResult result;
  bool claim_violation = false;
};

// What the measurer tells its caller, and asks it, as it goes. Called on the
// measuring thread.
class MeasureHooks {
 public:
  virtual ~MeasureHooks() = default;
  // Before the first kernel of `candidate` in `phase` ("oracle", "determinism",
  // "timing") is launched. The candidate named last is the one whose kernels may
  // be running until the next call or the end of Measure.
  virtual void Launching(const CandidateSpec& candidate, std::string_view phase) = 0;
  // Between candidates and between timed repeats, with no kernel in flight on
  // the stream: a non-OK status stops the measurement and Measure returns it
  // (nothing is recorded). May block (e.g. while queued dispatches use the
  // stream); that time does not count against the bucket budget.
  virtual absl::Status Checkpoint() = 0;
};

class Measurer {
 public:
  // `hooks` (may be null) must outlive the Measurer.
  Measurer(Backend& backend, Stream& stream, const MeasureOptions& options,
           MeasureHooks* hooks = nullptr)
      : backend_(backend), stream_(stream), options_(options), hooks_(hooks) {}
  Measurer(const Measurer&) = delete;
  Measurer& operator=(const Measurer&) = delete;

  // Measures each candidate on problem `p`. The candidates must cover `p`.
  absl::StatusOr<std::vector<Measurement>> Measure(
      const Problem& p, const std::vector<const RegisteredCandidate*>& candidates);

 private:
  // Phase 1: one run on poisoned C, checked against the reference `ref`. Leaves
  // C in `out`; false (with r's state and reason set) when the run fails or the
  // output is out of budget.
  bool PassesOracle(const CandidateMember& member, const GemmArgs& args, Buffer& c,
                    const std::vector<double>& ref, CandidateResult* r, std::vector<uint8_t>* out);
  // Phase 2: the member's determinism claim, checked against the first run's C.
  // False (state kQuarantined, and claim_violation when the claim was disproved
  // rather than a run failing) when it does not hold.
  bool HoldsDeterminismClaims(const CandidateMember& member, const GemmArgs& args, Buffer& c,
                              const std::vector<uint8_t>& first, Measurement* meas);
  // Phase 3: warm-up, then device-timed samples until stable or out of budget;
  // sets r to kTimed with the figures, or kError. `best_median` (0: none yet) is
  // the fastest median so far: a candidate far slower stops sampling early.
  // A non-OK return is a checkpoint's: the measurement stops.
  absl::Status TimeOnDevice(const CandidateMember& member, const GemmArgs& args,
                            double best_median, CandidateResult* r);

  // MeasureHooks::Launching, when there are hooks.
  void Launching(const CandidateSpec& candidate, std::string_view phase);
  // MeasureHooks::Checkpoint (time spent in it is not held), when there are hooks.
  absl::Status Checkpoint();
  // Whether the bucket budget is spent: time since Measure began, less checkpoints.
  bool BucketBudgetSpent() const;

  Backend& backend_;
  Stream& stream_;
  MeasureOptions options_;
  MeasureHooks* hooks_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::duration yielded_{};  // time spent in checkpoints
};

// Random operand values: N(0,1) scaled by 0.5, rounded to the dtype, never all zero.
void FillRandom(DType dtype, void* data, size_t count, uint64_t seed);

}  // namespace arbiter
