// Measures one bucket on a backend: fresh random operands of the requested
// shape (never zeros), then each candidate in three phases - checked by the
// oracle on poisoned output; its determinism claim checked by running it again
// (and, for batch_invariant, at a smaller M); then timed: warm-up, cold cache
// before every sample, each sample by the device timer, repeated until the
// median is stable or the candidate's time budget (host wall time) is spent.
// A candidate that fails, errors or cannot be timed is recorded with its state
// and reason - never as a latency.
//
// Not thread-safe: one Measurer per worker stream.
#pragma once

#include <cstdint>
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

class Measurer {
 public:
  Measurer(Backend& backend, Stream& stream, const MeasureOptions& options)
      : backend_(backend), stream_(stream), options_(options) {}
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
  void TimeOnDevice(const CandidateMember& member, const GemmArgs& args, double best_median,
                    CandidateResult* r);

  Backend& backend_;
  Stream& stream_;
  MeasureOptions options_;
};

// Random operand values: N(0,1) scaled by 0.5, rounded to the dtype, never all zero.
void FillRandom(DType dtype, void* data, size_t count, uint64_t seed);

}  // namespace arbiter
