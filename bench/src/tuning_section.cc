#include "bench/src/tuning_section.h"

#include <chrono>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "engine/arbiter.h"
#include "engine/verdict_store.h"

namespace arbiter::bench {

absl::StatusOr<Table> RunTuning(const std::string& kind, int cpu_threads,
                                const std::vector<Problem>& shapes, int repeats, bool verbose) {
  ASSIGN_OR_RETURN(BenchDevice dev, OpenDevice(kind, cpu_threads));
  ASSIGN_OR_RETURN(std::unique_ptr<VerdictStore> store, VerdictStore::Open(":memory:"));
  const ArbiterOptions defaults;  // the daemon's: what a sync miss waits for
  ASSIGN_OR_RETURN(std::unique_ptr<Arbiter> arbiter,
                   Arbiter::Create(defaults, std::move(dev.backend), std::move(dev.registry),
                                   std::move(store)));
  // The phases' shares come from the engine's own accounting (Verdict::cost) of the last run.
  std::vector<std::string> columns = {"dtype", "m", "n", "k", "candidates", "timed", "winner",
                                      "tune_wall_s", "spread", "runs", "rows_checked"};
  for (const auto& [phase, seconds] : TuningCost{}.Phases()) {
    columns.push_back(absl::StrCat(phase, "_pct"));
  }
  Table table(columns);
  for (const Problem& p : shapes) {
    std::vector<double> walls;
    Verdict last;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      ASSIGN_OR_RETURN(last, arbiter->Tune(p));
      walls.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    int timed = 0;
    for (const CandidateResult& r : last.results) timed += r.timed();
    const SampleStats stats = Summarize(walls);
    std::vector<std::string> row = {
        DTypeName(p.dtype), absl::StrCat(p.m), absl::StrCat(p.n), absl::StrCat(p.k),
        absl::StrCat(last.results.size()), absl::StrCat(timed), last.winner,
        Fixed(stats.median, 4), Fixed(stats.spread, 3), absl::StrCat(stats.count),
        absl::StrCat(last.cost.rows_checked)};
    const double total = last.cost.Total();
    for (const auto& [phase, seconds] : last.cost.Phases()) {
      row.push_back(total > 0 ? Fixed(100 * seconds / total, 1) : "");
    }
    table.Add(row);
    if (verbose) std::cerr << "tuning " << p << ": " << Fixed(stats.median, 3) << " s\n";
  }
  return table;
}

}  // namespace arbiter::bench
