// The kernels section and the floor's rates.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "bench/src/sections.h"
#include "engine/bucket.h"

namespace arbiter::bench {
namespace {

// One measured row before the floor is known.
struct Row {
  BenchShape shape;
  CandidateResult first;
  std::optional<CandidateResult> second;
  double tune_wall = 0;
  std::string clocks;  // SM clock range seen while timing, "min-max" MHz, where known
};

std::string ClockRange(const MeasureReport& r) {
  if (r.sm_clock_max_mhz <= 0) return "";
  return absl::StrCat(static_cast<int>(r.sm_clock_min_mhz), "-", static_cast<int>(r.sm_clock_max_mhz));
}

const CandidateResult* Find(const std::vector<Measurement>& ms, const std::string& name) {
  for (const auto& m : ms) {
    if (m.result.name == name) return &m.result;
  }
  return nullptr;
}

}  // namespace

double Rates::Floor(const Problem& p) const {
  const double compute = peak_flops > 0 ? p.flops() / peak_flops : 0;
  const double bytes = static_cast<double>(p.a_bytes() + p.b_bytes() + p.c_bytes());
  const double memory = copy_bandwidth > 0 ? bytes / copy_bandwidth : 0;
  return std::max(compute, memory);
}

absl::StatusOr<Rates> MeasureRates(BenchDevice& dev, DType dtype,
                                   const std::vector<int64_t>& squares,
                                   const MeasureOptions& measure) {
  Rates rates;
  const RegisteredCandidate* vendor = dev.registry->Find(dev.vendor);
  for (int64_t s : squares) {
    const Problem p{dtype, s, s, s};
    if (vendor == nullptr || !dev.registry->CoverageGap(*vendor, p).empty()) continue;
    Measurer measurer(*dev.backend, *dev.stream, measure);
    ASSIGN_OR_RETURN(std::vector<Measurement> ms, measurer.Measure(p, {vendor}));
    if (ms.empty() || !ms[0].result.timed()) continue;
    const double rate = p.flops() / ms[0].result.median_seconds;
    if (rate > rates.peak_flops) {
      rates.peak_flops = rate;
      rates.peak_shape = p.ToString();
    }
  }
  ASSIGN_OR_RETURN(rates.copy_bandwidth,
                   CopyBandwidth(dev, dev.kind == "cuda" ? (size_t{1} << 30) : (size_t{64} << 20),
                                 dev.kind == "cuda" ? 20 : 5));
  return rates;
}

absl::StatusOr<Table> RunKernels(BenchDevice& dev, const std::vector<BenchShape>& shapes,
                                 const SectionOptions& options, Rates* rates,
                                 std::vector<std::string>* skipped) {
  const Clock::time_point start = Clock::now();
  std::vector<Row> rows;
  std::map<std::string, double> vendor_time;  // by shape
  for (const BenchShape& s : shapes) {
    const Problem& p = s.problem;
    if (options.OverGflop(p)) {
      skipped->push_back(absl::StrCat("kernels ", p.ToString(), ": over --max_gflop"));
      continue;
    }
    if (options.budget_seconds > 0 && Since(start) > options.budget_seconds) {
      skipped->push_back(absl::StrCat("kernels ", p.ToString(), ": section time budget spent"));
      continue;
    }
    const std::vector<const RegisteredCandidate*> cands = Covering(dev, p);
    if (cands.empty()) {
      skipped->push_back(absl::StrCat("kernels ", p.ToString(), ": no candidate covers it"));
      continue;
    }
    Measurer measurer(*dev.backend, *dev.stream, options.measure);
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(MeasureReport report, measurer.Race(p, cands));
    const double tune_wall = Since(t0);
    const std::vector<Measurement>& first = report.measurements;
    if (report.sm_clock_max_mhz > 0) {
      rates->clock_min_mhz = rates->clock_min_mhz > 0
                                 ? std::min(rates->clock_min_mhz, report.sm_clock_min_mhz)
                                 : report.sm_clock_min_mhz;
      rates->clock_max_mhz = std::max(rates->clock_max_mhz, report.sm_clock_max_mhz);
    }
    std::vector<Measurement> second;
    if (options.second_run) {
      ASSIGN_OR_RETURN(second, measurer.Measure(p, cands));
    }
    for (const Measurement& m : first) {
      Row row{s, m.result, std::nullopt, tune_wall, ClockRange(report)};
      if (const CandidateResult* r2 = Find(second, m.result.name)) row.second = *r2;
      if (m.result.name == dev.vendor && m.result.timed()) {
        vendor_time[p.ToString()] = m.result.median_seconds;
        if (s.group == "square" && p.flops() / m.result.median_seconds > rates->peak_flops) {
          rates->peak_flops = p.flops() / m.result.median_seconds;
          rates->peak_shape = p.ToString();
        }
      }
      rows.push_back(std::move(row));
    }
    if (options.verbose) {
      std::cerr << "kernels " << p << ": " << cands.size() << " candidates, "
                << Fixed(tune_wall, 2) << " s\n";
    }
  }

  Table table({"group", "dtype", "m", "n", "k", "bucket", "candidate", "tier", "state", "reason",
               "median_s", "spread", "samples", "tflops", "vs_vendor", "pct_of_vendor", "floor_s",
               "vs_floor", "run2_median_s", "run2_agrees", "tune_wall_s", "sm_clock_mhz"});
  for (const Row& r : rows) {
    const Problem& p = r.shape.problem;
    const CandidateResult& c = r.first;
    const bool timed = c.timed();
    const double t = timed ? c.median_seconds : -1;
    const auto vt = vendor_time.find(p.ToString());
    const double tv = vt == vendor_time.end() ? -1 : vt->second;
    const double floor = rates->Floor(p);
    std::string run2, agrees;
    if (timed && r.second && r.second->timed()) {
      run2 = Sci(r.second->median_seconds);
      const double diff = std::abs(r.second->median_seconds - t) / t;
      agrees = diff <= std::max(c.spread, r.second->spread) ? "yes" : "no";
    }
    table.Add({r.shape.group, DTypeName(p.dtype), absl::StrCat(p.m), absl::StrCat(p.n),
               absl::StrCat(p.k), BucketOf(p).ToString(), c.name, absl::StrCat(c.tier),
               ResultStateName(c.state), c.reason, Sci(t), timed ? Fixed(c.spread, 4) : "",
               absl::StrCat(c.samples), timed ? Fixed(p.flops() / t / 1e12, 4) : "",
               timed && tv > 0 ? Fixed(t / tv, 3) : "", timed && tv > 0 ? Fixed(100 * tv / t, 1) : "",
               Sci(floor > 0 ? floor : -1), timed && floor > 0 ? Fixed(t / floor, 2) : "", run2,
               agrees, Fixed(r.tune_wall, 3), r.clocks});
  }
  return table;
}

}  // namespace arbiter::bench
