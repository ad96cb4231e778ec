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
  Table table({"dtype", "m", "n", "k", "candidates", "timed", "winner", "tune_wall_s", "spread",
               "runs"});
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
    table.Add({DTypeName(p.dtype), absl::StrCat(p.m), absl::StrCat(p.n), absl::StrCat(p.k),
               absl::StrCat(last.results.size()), absl::StrCat(timed), last.winner,
               Fixed(stats.median, 4), Fixed(stats.spread, 3), absl::StrCat(stats.count)});
    if (verbose) std::cerr << "tuning " << p << ": " << Fixed(stats.median, 3) << " s\n";
  }
  return table;
}

}  // namespace arbiter::bench
