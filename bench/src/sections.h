// The bench's sections, each measured on one BenchDevice and written as a Table:
//   kernels   - every candidate on the kernel grid, against the vendor delegate
//               and the shape's floor, all from the same run;
//   selection - what the engine serves for each listed shape against the
//               exhaustive best measured at that exact shape (regret), the
//               vendor alone and the tier default; and transfer: a bucket
//               measured at one end and served at its other shapes.
// Candidates are the registry's; each is checked by the oracle on poisoned
// output (and its determinism claim) before it is timed - the Measurer's phases.
#pragma once

#include <string>
#include <vector>

#include "bench/src/bench_device.h"
#include "bench/src/shapes.h"
#include "bench/src/table.h"
#include "engine/arbiter.h"
#include "engine/measurer.h"

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
};

// Times the vendor delegate at `squares` (n^3 of `dtype`) and the copy bandwidth.
absl::StatusOr<Rates> MeasureRates(BenchDevice& dev, DType dtype, const std::vector<int64_t>& squares,
                                   const MeasureOptions& measure);

// Kernels: one row per (shape, candidate). Raises rates->peak_flops where the
// vendor runs a grid square faster than the probe did, before floors are computed.
absl::StatusOr<Table> RunKernels(BenchDevice& dev, const std::vector<BenchShape>& shapes,
                                 const SectionOptions& options, Rates* rates,
                                 std::vector<std::string>* skipped);

struct SelectionTables {
  Table selection{std::vector<std::string>{}};
  Table transfer{std::vector<std::string>{}};
};

// Selection and transfer: `serving` is the engine under test (its own backend);
// `dev` measures the exhaustive figures.
absl::StatusOr<SelectionTables> RunSelection(BenchDevice& dev, Arbiter& serving,
                                             const std::vector<BenchShape>& shapes,
                                             const SectionOptions& options, const Rates& rates,
                                             bool transfer, std::vector<std::string>* skipped);

}  // namespace arbiter::bench
