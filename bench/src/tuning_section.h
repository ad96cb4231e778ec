// The tuning-cost section: how long the engine takes to measure one bucket
// (every candidate: oracle, determinism check, timing) under the daemon's
// default measure options, and how that grows with the shape. Each shape is
// tuned `repeats` times on a fresh in-memory store (Arbiter::Tune re-measures);
// the figure is the median wall time, with the spread.
#pragma once

#include <string>
#include <vector>

#include "bench/src/bench_device.h"
#include "bench/src/table.h"

namespace arbiter::bench {

absl::StatusOr<Table> RunTuning(const std::string& kind, int cpu_threads,
                                const std::vector<Problem>& shapes, int repeats, bool verbose);

}  // namespace arbiter::bench
