// The transfer section: a bucket's verdict served at shapes it was not measured
// at, before and after refinement gave each shape a verdict of its own.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/src/sections.h"
#include "engine/bucket.h"
#include "engine/selection.h"

namespace arbiter::bench {
namespace {

// What a shape was served before refinement, measured exhaustively there.
struct Before {
  Problem q;
  Selection served;
  Exhaustive exhaustive;
};

// `served` against `best` at `q`, timed round by round in a race of the two
// alone (the engine's Measurer: oracle, claims, then interleaved cold samples),
// every round counted: both are timed max_samples times whatever their spread.
absl::StatusOr<PairedRatio> RacePair(BenchDevice& dev, const Problem& q, const std::string& served,
                                     const std::string& best, MeasureOptions measure) {
  std::vector<const RegisteredCandidate*> two;
  for (const RegisteredCandidate* c : Covering(dev, q)) {
    if (c->spec.name == served || c->spec.name == best) two.push_back(c);
  }
  if (two.size() != 2) {
    return absl::NotFoundError(absl::StrCat(served, " or ", best, " does not cover ", q.ToString()));
  }
  measure.min_samples = measure.max_samples;
  Measurer measurer(*dev.backend, *dev.stream, measure);
  ASSIGN_OR_RETURN(MeasureReport report, measurer.Race(q, two));
  return report.samples.Compare(served, best);
}

}  // namespace

void TuningTally::OnTuning(const Problem&, const Verdict& v, double wall_seconds) {
  absl::MutexLock lock(&mu_);
  ++sum_.races;
  sum_.device_seconds += v.cost.device;
  sum_.wall_seconds += wall_seconds;
}

TuningTally::Sum TuningTally::Take() {
  absl::MutexLock lock(&mu_);
  return std::exchange(sum_, Sum{});
}

std::vector<TransferGroup> TransferGroups(const std::vector<BenchShape>& shapes) {
  std::vector<TransferGroup> groups;
  std::map<BucketKey, size_t> index;
  for (const BenchShape& s : shapes) {
    const BucketKey key = BucketKeyOf(s.problem);
    auto [it, first] = index.emplace(key, groups.size());
    if (first) {
      groups.push_back(TransferGroup{s.problem, {}, "list"});
    } else if (!(groups[it->second].measured == s.problem)) {
      groups[it->second].served.push_back(s.problem);
    }
  }
  for (TransferGroup& g : groups) {
    for (const Problem& q : BucketGrid(g.measured)) {
      if (std::find(g.served.begin(), g.served.end(), q) == g.served.end()) g.served.push_back(q);
    }
  }
  return groups;
}

std::vector<TransferGroup> IssueTransferGroups() {
  const auto bf16 = [](int64_t m, int64_t n, int64_t k) { return Problem{DType::kBF16, m, n, k}; };
  std::vector<TransferGroup> groups = {
      {bf16(2048, 3584, 3584), {bf16(1536, 3072, 3072), bf16(2048, 4096, 4096)}, "issue 11"},
      {bf16(128, 4096, 4096), {bf16(96, 3072, 3072), bf16(72, 2056, 2056)}, "issue 11"},
      {bf16(8192, 8192, 8192), {bf16(4104, 4104, 4104)}, "issue 11"},
  };
  for (TransferGroup& g : groups) {
    for (const Problem& q : BucketGrid(g.measured)) {
      if (std::find(g.served.begin(), g.served.end(), q) == g.served.end()) g.served.push_back(q);
    }
  }
  return groups;
}

std::vector<TransferGroup> OnlyServedAt(std::vector<TransferGroup> groups,
                                        const std::string& dims) {
  if (dims.empty()) return groups;
  const std::vector<std::string> wanted = absl::StrSplit(dims, ',', absl::SkipEmpty());
  std::vector<TransferGroup> out;
  for (TransferGroup& g : groups) {
    std::vector<Problem> served;
    for (const Problem& q : g.served) {
      if (std::find(wanted.begin(), wanted.end(), Dims(q)) != wanted.end()) served.push_back(q);
    }
    if (served.empty()) continue;
    g.served = std::move(served);
    out.push_back(std::move(g));
  }
  return out;
}

absl::StatusOr<Table> RunTransfer(BenchDevice& dev, Arbiter& engine, TuningTally& tally,
                                  const std::vector<TransferGroup>& groups,
                                  const SectionOptions& options,
                                  std::vector<std::string>* skipped) {
  const Clock::time_point start = Clock::now();
  Table out({"origin", "dtype", "bucket", "measured_at", "served_at", "served_before", "best",
             "t_best_s", "t_before_s", "regret_before", "served_after", "scope_after",
             "t_after_s", "regret_after", "regret_after_paired", "regret_after_low",
             "regret_after_high", "paired_rounds", "refine_races", "refine_device_s", "refine_wall_s",
             "max_dim", "best_raced", "refine_entrants", "refine_reason"});
  for (const TransferGroup& g : groups) {
    const std::string label = absl::StrCat("transfer ", g.measured.ToString());
    if (options.budget_seconds > 0 && Since(start) > options.budget_seconds) {
      skipped->push_back(absl::StrCat(label, ": section time budget spent"));
      continue;
    }
    if (options.OverGflop(g.measured)) {
      skipped->push_back(absl::StrCat(label, ": over --max_gflop"));
      continue;
    }
    // A store holding nothing, so the bucket's verdict is measured at g.measured
    // and nowhere else, and nothing refined earlier serves a shape.
    InvalidateScope all;
    all.all = true;
    RETURN_IF_ERROR(engine.Invalidate(all).status());
    absl::StatusOr<Verdict> bucket = engine.Tune(g.measured);
    tally.Take();
    if (!bucket.ok()) {
      skipped->push_back(absl::StrCat(label, ": ", bucket.status().ToString()));
      continue;
    }
    // Before refinement: every served shape answered from the bucket's verdict.
    // All of them first, since refining one may split the bucket under the others.
    std::vector<Before> before;
    for (const Problem& q : g.served) {
      const std::string what = absl::StrCat(label, " served at ", q.ToString());
      if (!(BucketKeyOf(q) == BucketKeyOf(g.measured))) {
        skipped->push_back(absl::StrCat(what, ": not in the same bucket"));
        continue;
      }
      if (options.OverGflop(q)) {
        skipped->push_back(absl::StrCat(what, ": over --max_gflop"));
        continue;
      }
      if (options.budget_seconds > 0 && Since(start) > options.budget_seconds) {
        skipped->push_back(absl::StrCat(what, ": section time budget spent"));
        continue;
      }
      absl::StatusOr<Selection> served = engine.Select(q, SelectOptions{});
      if (!served.ok()) {
        skipped->push_back(absl::StrCat(what, ": ", served.status().ToString()));
        continue;
      }
      if (!served->verdict || !(served->verdict->measured == g.measured)) {
        skipped->push_back(absl::StrCat(what, ": not served from the bucket's verdict (",
                                        served->reason, ")"));
        continue;
      }
      ASSIGN_OR_RETURN(Exhaustive e, MeasureAll(dev, q, options.measure));
      before.push_back(Before{q, *std::move(served), std::move(e)});
    }
    // After: each shape tuned (refined among the bucket verdict's leaders) and served again.
    for (const Before& b : before) {
      const Problem& q = b.q;
      const Exhaustive& e = b.exhaustive;
      const Clock::time_point t0 = Clock::now();
      absl::StatusOr<Verdict> refined = engine.Tune(q);
      const double refine_wall = Since(t0);
      const TuningTally::Sum cost = tally.Take();
      std::string after, scope;
      double t_after = -1;
      // What the refinement raced (its own figures, name=us) and why it chose: the
      // answer to "why not the best" where the regret after stays high.
      std::string best_raced, entrants, why;
      if (refined.ok()) {
        for (const CandidateResult& r : refined->results) {
          if (r.state == ResultState::kUnmeasured) continue;
          if (r.name == e.best) best_raced = "yes";
          absl::StrAppend(&entrants, entrants.empty() ? "" : ";", r.name, "=",
                          r.timed() ? absl::StrFormat("%.2f", r.median_seconds * 1e6)
                                    : std::string(ResultStateName(r.state)));
        }
        if (best_raced.empty()) best_raced = "no";
        why = refined->reason;
      }
      if (refined.ok()) {
        absl::StatusOr<Selection> s = engine.Select(q, SelectOptions{});
        if (s.ok()) {
          after = s->candidate;
          scope = s->verdict ? s->verdict->scope.ToString() : VerdictSourceName(s->source);
          if (scope.empty()) scope = "bucket";
          t_after = e.Time(after);
        }
      } else {
        skipped->push_back(absl::StrCat(label, " refined at ", q.ToString(), ": ",
                                        refined.status().ToString()));
      }
      // Noise or a miss: served_after against the best, round by round in a race
      // of their own (the exhaustive race's medians read one draw of each).
      std::string paired, low, high, rounds;
      if (!after.empty() && after == e.best) {
        paired = low = high = Fixed(1, 3);
        rounds = "0";
      } else if (t_after > 0) {
        absl::StatusOr<PairedRatio> r = RacePair(dev, q, after, e.best, options.measure);
        if (r.ok() && r->pairs > 0) {
          paired = Fixed(r->median, 3);
          low = Fixed(r->low, 3);
          high = Fixed(r->high, 3);
          rounds = absl::StrCat(r->pairs);
        } else {
          skipped->push_back(absl::StrCat(label, " paired at ", q.ToString(), ": ",
                                          r.ok() ? "no round timed both" : r.status().ToString()));
        }
      }
      const double t_before = e.Time(b.served.candidate);
      out.Add({g.origin, DTypeName(q.dtype), BucketOf(q).ToString(), Dims(g.measured), Dims(q),
               b.served.candidate, e.best, Sci(e.best_seconds), Sci(t_before),
               Ratio(t_before, e.best_seconds), after, scope, Sci(t_after),
               Ratio(t_after, e.best_seconds), paired, low, high, rounds,
               absl::StrCat(cost.races),
               Sci(cost.device_seconds), Fixed(refine_wall, 4),
               absl::StrCat(std::max({q.m, q.n, q.k})), best_raced, entrants, why});
      if (options.verbose) {
        std::cerr << "transfer " << q << " (bucket measured at " << g.measured << "): before "
                  << b.served.candidate << ", after " << after << ", best " << e.best << "\n";
      }
    }
  }
  return out;
}

}  // namespace arbiter::bench
