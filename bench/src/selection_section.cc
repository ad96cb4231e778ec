// The selection section: what the engine serves against the exhaustive best.
#include <chrono>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/src/sections.h"
#include "engine/bucket.h"
#include "engine/selection.h"

namespace arbiter::bench {

double Exhaustive::Time(const std::string& name) const {
  const auto it = seconds.find(name);
  return it == seconds.end() ? -1 : it->second;
}

double Exhaustive::PairedRatioToBest(const std::string& name) const {
  if (name == best) return best_seconds > 0 ? 1 : -1;
  const PairedRatio r = samples.Compare(name, best);
  return r.pairs > 0 && r.pairs >= samples.min_pairs() ? r.median : -1;
}

absl::StatusOr<Exhaustive> MeasureAll(BenchDevice& dev, const Problem& p,
                                      const MeasureOptions& measure) {
  Measurer measurer(*dev.backend, *dev.stream, measure);
  ASSIGN_OR_RETURN(MeasureReport report, measurer.Race(p, Covering(dev, p)));
  Exhaustive e;
  e.samples = std::move(report.samples);
  for (const Measurement& m : report.measurements) {
    if (!m.result.timed()) continue;
    e.seconds[m.result.name] = m.result.median_seconds;
    if (e.best_seconds < 0 || m.result.median_seconds < e.best_seconds) {
      e.best_seconds = m.result.median_seconds;
      e.best = m.result.name;
    }
  }
  return e;
}

// Each candidate of the verdict that served: its median, spread and samples
// where timed, else its state and why.
std::string RaceOf(const Selection& served) {
  if (!served.verdict) return "";
  std::vector<std::string> out;
  for (const CandidateResult& r : served.verdict->results) {
    out.push_back(r.timed()
                      ? absl::StrFormat("%s %.2fus spread %.1f%% n=%d", r.name,
                                        r.median_seconds * 1e6, r.spread * 100, r.samples)
                      : absl::StrCat(r.name, " ", ResultStateName(r.state),
                                     r.reason.empty() ? "" : absl::StrCat(" (", r.reason, ")")));
  }
  return absl::StrJoin(out, "; ");
}

std::string Ratio(double num, double den) {
  return num > 0 && den > 0 ? Fixed(num / den, 3) : "";
}

absl::StatusOr<Table> RunSelection(BenchDevice& dev, Arbiter& serving,
                                   const std::vector<BenchShape>& shapes,
                                   const SectionOptions& options, const Rates& rates,
                                   std::vector<std::string>* skipped) {
  const Clock::time_point start = Clock::now();
  Table out({"dtype", "m", "n", "k", "bucket", "served", "source", "measured_at", "best",
             "tier_default", "t_best_s", "t_served_s", "t_vendor_s", "t_tier_s", "regret",
             "vendor_vs_best", "tier_vs_best", "floor_s", "served_vs_floor", "vendor_vs_floor",
             "select_wall_s", "regret_paired", "served_reason", "served_race"});
  for (const BenchShape& s : shapes) {
    const Problem& p = s.problem;
    if (options.OverGflop(p)) {
      skipped->push_back(absl::StrCat("selection ", p.ToString(), ": over --max_gflop"));
      continue;
    }
    if (options.budget_seconds > 0 && Since(start) > options.budget_seconds) {
      skipped->push_back(absl::StrCat("selection ", p.ToString(), ": section time budget spent"));
      continue;
    }
    const std::vector<const RegisteredCandidate*> cands = Covering(dev, p);
    const auto tier_it = TierDefault(cands, [](const RegisteredCandidate*) { return true; },
                                     [](const RegisteredCandidate* c) { return c->spec.tier; });
    const std::string tier = tier_it == cands.end() ? "" : (*tier_it)->spec.name;
    // What the engine serves, under the daemon's (sync) policy: the first shape
    // of a bucket measures it; later shapes of the bucket are served from that.
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<Selection> served = serving.Select(p, SelectOptions{});
    const double select_wall = Since(t0);
    if (!served.ok()) {
      skipped->push_back(absl::StrCat("selection ", p.ToString(), ": ", served.status().ToString()));
      continue;
    }
    ASSIGN_OR_RETURN(Exhaustive e, MeasureAll(dev, p, options.measure));
    const double floor = rates.Floor(p);
    const double t_served = e.Time(served->candidate);
    const double t_vendor = e.Time(dev.vendor);
    out.Add(
        {DTypeName(p.dtype), absl::StrCat(p.m), absl::StrCat(p.n), absl::StrCat(p.k),
         BucketOf(p).ToString(), served->candidate, VerdictSourceName(served->source),
         served->verdict ? Dims(served->verdict->measured) : "", e.best, tier, Sci(e.best_seconds),
         Sci(t_served), Sci(t_vendor), Sci(e.Time(tier)), Ratio(t_served, e.best_seconds),
         Ratio(t_vendor, e.best_seconds), Ratio(e.Time(tier), e.best_seconds), Sci(floor),
         Ratio(t_served, floor), Ratio(t_vendor, floor), Fixed(select_wall, 3),
         Fixed(e.PairedRatioToBest(served->candidate), 3), served->reason, RaceOf(*served)});
    if (options.verbose) {
      std::cerr << "selection " << p << ": served " << served->candidate << ", best " << e.best
                << "\n";
    }
  }
  return out;
}

}  // namespace arbiter::bench
