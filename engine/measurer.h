// Measures one bucket on a backend: fresh random operands of the requested
// shape (never zeros), each candidate checked by the oracle on poisoned output,
// its determinism claim checked by running it again (and, for batch_invariant,
// at a smaller M), then timed on the device: warm-up, cold cache before every
// sample, repeats until the median is stable or the time budget is spent.
// A candidate that fails, errors or cannot be timed is recorded unmeasured with
// its reason - never as a latency.
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
  double budget_seconds = 2.0;      // per candidate: stop sampling once spent (device time)
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
  Backend& backend_;
  Stream& stream_;
  MeasureOptions options_;
};

// Random operand values: N(0,1) scaled by 0.5, rounded to the dtype, never all zero.
void FillRandom(DType dtype, void* data, size_t count, uint64_t seed);

}  // namespace arbiter
