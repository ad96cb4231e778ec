// The bench's sections, each measured on one BenchDevice and written as a Table:
//   kernels   - every candidate on the kernel grid, against the vendor delegate
//               and the shape's floor, all from the same run;
//   selection - what the engine serves for each listed shape against the
//               exhaustive best measured at that exact shape (regret), the
//               vendor alone and the tier default;
//   transfer  - a bucket's verdict measured at one shape and served at others
//               of the bucket (regret against each one's exhaustive best),
//               then the same shapes after refinement gave each its own
//               verdict, with what the refinement cost.
// Candidates are the registry's; each is checked by the oracle on poisoned
// output (and its determinism claim) before it is timed - the Measurer's phases.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

#include "bench/src/bench_device.h"
#include "bench/src/shapes.h"
#include "bench/src/table.h"
#include "engine/arbiter.h"
#include "engine/measurer.h"
#include "engine/observer.h"

namespace arbiter::bench {

// The floor's two rates, measured in the run.
struct Rates {
  double peak_flops = 0;      // FLOP/s: the vendor's best large-square rate
  std::string peak_shape;     // where it was seen
  double copy_bandwidth = 0;  // bytes/s: device-to-device copy, read + write
  double clock_min_mhz = 0;   // SM clock range seen while timing (0: not reported)
  double clock_max_mhz = 0;
  // max(FLOPs / peak, (A + B + C bytes) / bandwidth), in seconds.
  double Floor(const Problem& p) const;
};

struct SectionOptions {
  MeasureOptions measure;      // how every candidate is timed
  double max_gflop = 0;        // skip shapes of more GFLOP (0: none skipped)
  double budget_seconds = 0;   // start no new shape after this long (0: no limit)
  bool second_run = true;      // measure each shape twice, to show the runs agree
  bool verbose = true;         // a progress line per shape on stderr

  // Whether `p` is over --max_gflop (and so skipped).
  bool OverGflop(const Problem& p) const { return max_gflop > 0 && p.flops() > max_gflop * 1e9; }
};

using Clock = std::chrono::steady_clock;
// Seconds of host wall time since `t0` (section budgets and progress, never kernel time).
inline double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "MxNxK", how the tables name a shape.
inline std::string Dims(const Problem& p) { return absl::StrCat(p.m, "x", p.n, "x", p.k); }

// Times the vendor delegate at `squares` (n^3 of `dtype`) and the copy bandwidth.
absl::StatusOr<Rates> MeasureRates(BenchDevice& dev, DType dtype, const std::vector<int64_t>& squares,
                                   const MeasureOptions& measure);

// Kernels: one row per (shape, candidate). Raises rates->peak_flops where the
// vendor runs a grid square faster than the probe did, before floors are computed.
absl::StatusOr<Table> RunKernels(BenchDevice& dev, const std::vector<BenchShape>& shapes,
                                 const SectionOptions& options, Rates* rates,
                                 std::vector<std::string>* skipped);

// Every covering candidate timed at exactly one shape, by name; the fastest in `best`.
struct Exhaustive {
  std::map<std::string, double> seconds;  // timed candidates only
  std::string best;
  double best_seconds = -1;
  RaceSamples samples;  // the race's samples by round
  double Time(const std::string& name) const;  // -1 when not timed
  // The median over the race's rounds of t_name / t_best: how much slower `name`
  // was than the best, sample by sample, with what a round's samples share
  // cancelled. -1 when the two shared fewer than the race's min_samples rounds.
  double PairedRatioToBest(const std::string& name) const;
};
absl::StatusOr<Exhaustive> MeasureAll(BenchDevice& dev, const Problem& p,
                                      const MeasureOptions& measure);
// num / den to three decimals; "" unless both are positive.
std::string Ratio(double num, double den);

// Selection: `serving` is the engine under test (its own backend, its own
// store); `dev` measures the exhaustive figures.
absl::StatusOr<Table> RunSelection(BenchDevice& dev, Arbiter& serving,
                                   const std::vector<BenchShape>& shapes,
                                   const SectionOptions& options, const Rates& rates,
                                   std::vector<std::string>* skipped);

// Every race the engine ran since the last Take: how many, their device time
// (the timed samples) and their wall time. Installed as the engine's observer.
class TuningTally final : public ArbiterObserver {
 public:
  struct Sum {
    int races = 0;
    double device_seconds = 0;
    double wall_seconds = 0;
  };
  void OnTuning(const Problem&, const Verdict& v, double wall_seconds) override;
  // What was counted since the last Take, and starts again from zero.
  Sum Take();

 private:
  absl::Mutex mu_;
  Sum sum_ ABSL_GUARDED_BY(mu_);
};

// A bucket measured at one shape and served at others of the same bucket.
struct TransferGroup {
  Problem measured;
  std::vector<Problem> served;
  std::string origin;  // where the group comes from: "list" or "issue 11"
};

// The groups for a shape list: each bucket the list touches, measured at its
// first shape there, served at the list's other shapes of that bucket and at
// the bucket's BucketGrid.
std::vector<TransferGroup> TransferGroups(const std::vector<BenchShape>& shapes);
// The groups of issue 11's table (bf16 on the H200): measured and served shapes.
std::vector<TransferGroup> IssueTransferGroups();
// `groups` served only at the shapes `dims` lists ("16x16x32776,1x12296x6152"),
// without the groups left serving none; all of them where `dims` is empty.
std::vector<TransferGroup> OnlyServedAt(std::vector<TransferGroup> groups,
                                        const std::string& dims);

// Transfer, before and after refinement. For each group, on `engine` (its store
// emptied first: Invalidate all): the bucket is tuned at `measured`; each served
// shape is selected (served from the bucket's verdict: "before") and measured
// exhaustively on `dev`; then each is tuned (refined: raced among the bucket
// verdict's leaders, maybe splitting the bucket) and selected again ("after").
// `tally` must be `engine`'s observer. One row per served shape.
absl::StatusOr<Table> RunTransfer(BenchDevice& dev, Arbiter& engine, TuningTally& tally,
                                  const std::vector<TransferGroup>& groups,
                                  const SectionOptions& options, std::vector<std::string>* skipped);

}  // namespace arbiter::bench
