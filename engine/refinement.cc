#include "engine/refinement.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace arbiter {

namespace {

const CandidateResult* Timed(const Verdict& v, const std::string& name) {
  const CandidateResult* r = v.Result(name);
  return r != nullptr && r->timed() ? r : nullptr;
}

int64_t DimOf(const Problem& p, char dim) { return dim == 'm' ? p.m : dim == 'n' ? p.n : p.k; }

const DimClass& ClassOf(const Bucket& b, char dim) {
  return dim == 'm' ? b.m : dim == 'n' ? b.n : b.k;
}

// Whether (lo, hi] holds a value whose alignment class is `align`: a multiple of
// `align` that, below 8, is not a multiple of 2 * align.
bool HoldsClass(int64_t lo, int64_t hi, int align) {
  for (int64_t v = (lo / align + 1) * align; v <= hi; v += align) {
    if (align == 8 || v % (2 * align) != 0) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> Leaders(const Verdict& v, const RefineOptions& options) {
  std::vector<const CandidateResult*> timed;
  for (const CandidateResult& r : v.results) {
    if (r.timed()) timed.push_back(&r);
  }
  std::stable_sort(timed.begin(), timed.end(), [](auto* x, auto* y) {
    return x->median_seconds < y->median_seconds;
  });
  std::vector<std::string> out;
  // The winner and those within the margin count against max_leaders; the fastest
  // at each stricter determinism level, and of each class within reach, come on top, so they
  // never crowd out the close contenders, which are what a shape elsewhere in
  // the bucket may prefer (on the H200, cuBLASLt's other heuristics and wgmma).
  int capped = 0;
  auto add = [&](const std::string& name, bool counted) {
    if (std::find(out.begin(), out.end(), name) != out.end()) return;
    if (counted && capped >= std::max(options.max_leaders, 1)) return;
    out.push_back(name);
    capped += counted;
  };
  const CandidateResult* winner = Timed(v, v.winner);
  if (winner != nullptr) add(winner->name, true);
  // The fastest meeting each stricter level: what a request requiring it is served.
  for (Determinism level : {Determinism::kRunToRun, Determinism::kBatchInvariant}) {
    for (const CandidateResult* r : timed) {
      if (r->determinism >= level) {
        add(r->name, false);
        break;
      }
    }
  }
  const double base = winner != nullptr ? winner->median_seconds
                                         : (timed.empty() ? 0 : timed.front()->median_seconds);
  const double bound = base * (1 + options.leader_margin);
  for (const CandidateResult* r : timed) {
    if (r->median_seconds <= bound) add(r->name, true);
  }
  // The fastest of each determinism class, looser ones included, while within
  // tile_margin of the winner: a class's reduction is its own (split-K partials
  // summed in order, or by atomics), and its cost follows the shape (the split
  // count follows K), so its rank at the measured shape does not carry - as for
  // a vendor's per-shape kernel. A request that allows the class is served it
  // where it is fastest (DecideRefinement filters by the request's level).
  const double reach = base * (1 + options.tile_margin);
  for (Determinism level : {Determinism::kNondeterministic, Determinism::kRunToRun,
                            Determinism::kBatchInvariant}) {
    for (const CandidateResult* r : timed) {
      if (r->determinism != level) continue;
      if (r->median_seconds <= reach) add(r->name, false);
      break;
    }
  }
  return out;
}

std::vector<TileEntrant> TileEntrants(const Verdict& v, const Problem& p,
                                      const std::vector<std::string>& leaders,
                                      const std::map<std::string, OutputTile>& tiles,
                                      int multiprocessors, const RefineOptions& options) {
  struct Row {
    const CandidateResult* result;
    const OutputTile* tile;  // null: unknown
    bool per_shape = false;  // a vendor heuristic picks its kernel at each shape
    double there = 1, here = 1;  // tile efficiency at the measured shape and at `p`
    double predicted = 0;        // the median, over the efficiency's change
  };
  std::vector<Row> rows;
  for (const CandidateResult& r : v.results) {
    if (!r.timed()) continue;
    Row row{&r, nullptr};
    const auto it = tiles.find(r.name);
    row.per_shape = it != tiles.end() && it->second.per_shape;
    if (it != tiles.end() && it->second.known()) {
      row.tile = &it->second;
      row.there = TileEfficiency(*row.tile, v.measured, multiprocessors);
      row.here = TileEfficiency(*row.tile, p, multiprocessors);
    }
    row.predicted = row.here > 0 ? r.median_seconds * row.there / row.here : r.median_seconds;
    rows.push_back(row);
  }
  if (rows.empty()) return {};
  const auto changed = [&](const Row& r) {
    const double ratio = r.here / r.there;
    return ratio > 1 + options.tile_change || ratio * (1 + options.tile_change) < 1;
  };
  const auto pct = [](double x) { return absl::StrFormat("%.0f%%", x * 100); };
  double best_predicted = rows.front().predicted, fastest = rows.front().result->median_seconds;
  const Row* winner = nullptr;
  for (const Row& r : rows) {
    best_predicted = std::min(best_predicted, r.predicted);
    fastest = std::min(fastest, r.result->median_seconds);
    if (r.result->name == v.winner) winner = &r;
  }
  const std::string at = v.measured.ToString();
  std::vector<std::pair<double, TileEntrant>> out;  // by predicted time
  for (const Row& r : rows) {
    const std::string& name = r.result->name;
    if (std::find(leaders.begin(), leaders.end(), name) != leaders.end()) continue;
    std::string why;
    const bool in_reach = r.predicted <= best_predicted * (1 + options.tile_margin);
    if (r.per_shape && r.result->median_seconds <= fastest * (1 + options.tile_margin)) {
      why = absl::StrFormat("a vendor heuristic picks its kernel per shape (%.2fx the fastest at %s)",
                            r.result->median_seconds / fastest, at);
    } else if (r.tile != nullptr && in_reach && changed(r)) {
      why = absl::StrCat("its ", TileName(*r.tile), " tiles' efficiency is ", pct(r.here),
                         " here, ", pct(r.there), " at ", at);
    } else if (r.tile != nullptr && in_reach && winner != nullptr && winner->tile != nullptr &&
               r.here > winner->here) {
      why = absl::StrCat("its ", TileName(*r.tile), " tiles fill this shape better (", pct(r.here),
                         ") than the winner's ", TileName(*winner->tile), " (", pct(winner->here),
                         ")");
    } else if (in_reach && winner != nullptr && changed(*winner) &&
               r.predicted <= winner->predicted * (1 + options.leader_margin)) {
      why = absl::StrCat("within the leaders' margin of the winner once its ",
                         TileName(*winner->tile), " tiles' efficiency here (", pct(winner->here),
                         ", ", pct(winner->there), " at ", at, ") is counted");
    } else if (r.tile != nullptr &&
               r.result->median_seconds <= fastest * (1 + options.tile_margin)) {
      const bool first_of_tile = std::none_of(rows.begin(), rows.end(), [&](const Row& o) {
        return o.tile != nullptr && *o.tile == *r.tile &&
               o.result->median_seconds < r.result->median_seconds;
      });
      if (first_of_tile) {
        why = absl::StrCat("the fastest with ", TileName(*r.tile), " tiles at ", at);
      }
    }
    if (!why.empty()) out.push_back({r.predicted, TileEntrant{name, std::move(why)}});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<TileEntrant> entrants;
  for (auto& [predicted, e] : out) {
    if (static_cast<int>(entrants.size()) >= options.max_tile_entrants) break;
    entrants.push_back(std::move(e));
  }
  return entrants;
}

Decision DecideRefinement(const std::vector<CandidateResult>& results, Determinism required,
                          const std::optional<std::string>& previous,
                          const std::optional<std::string>& fallback, const NoisePolicy& noise,
                          const RaceSamples* samples) {
  const CandidateResult* fastest = nullptr;
  bool previous_timed = false;
  for (const CandidateResult& r : results) {
    if (!r.timed() || r.determinism < required) continue;
    if (fastest == nullptr || r.median_seconds < fastest->median_seconds) fastest = &r;
    previous_timed |= previous && r.name == *previous;
  }
  // An earlier refinement's winner, timed again here, is an incumbent like any previous winner.
  if (previous_timed) return Decide(results, required, previous, noise, samples);
  // A spread over 100%: samples scattered wider than the median itself (a loaded host,
  // a kernel near the timer's resolution) - no figure to decide on.
  constexpr double kNoiseOnlySpread = 1.0;
  if (fastest != nullptr && fastest->spread > kNoiseOnlySpread) {
    Decision d = Decide(results, required, fallback, noise, samples);
    d.reason = absl::StrFormat("the fastest's figures are noise (%s, spread %.0f%%): %s",
                               fastest->name, fastest->spread * 100, d.reason);
    return d;
  }
  Decision d;
  if (fastest == nullptr) {
    d.reason = absl::StrCat("no candidate meeting ", DeterminismName(required),
                            " passed the oracle and was timed");
    return d;
  }
  d.winner = fastest->name;
  d.winner_version = fastest->version;
  d.reason = absl::StrFormat(
      "fastest at this shape (%.2fus, spread %.1f%%); no incumbent at a shape refined for the "
      "first time",
      fastest->median_seconds * 1e6, fastest->spread * 100);
  return d;
}

std::vector<std::string> UnsettledPick(const std::vector<CandidateResult>& results,
                                       Determinism required, const NoisePolicy& noise,
                                       const RaceSamples& samples) {
  const CandidateResult* fastest = nullptr;
  const CandidateResult* second = nullptr;
  for (const CandidateResult& r : results) {
    if (!r.timed() || r.determinism < required) continue;
    if (fastest == nullptr || r.median_seconds < fastest->median_seconds) {
      second = fastest;
      fastest = &r;
    } else if (second == nullptr || r.median_seconds < second->median_seconds) {
      second = &r;
    }
  }
  if (second == nullptr) return {};
  const PairedRatio paired = samples.Compare(second->name, fastest->name);
  if (paired.pairs == 0 || paired.pairs < samples.min_pairs()) return {};
  const bool ordered = paired.low > 1 || paired.high < 1;
  const double tie = noise.noise_multiple * noise.noise_floor;
  const bool tied = paired.low >= 1 - tie && paired.high <= 1 + tie;
  if (ordered || tied) return {};
  return {fastest->name, second->name};
}

const Verdict* RefinementOf(const Verdict& bucket_verdict, const Problem& p) {
  for (const Verdict& s : bucket_verdict.scoped) {
    if (s.scope.kind == VerdictScope::Kind::kShape && s.scope.Contains(p)) return &s;
  }
  return nullptr;
}

bool IsSplit(const Verdict& bucket_verdict) {
  return std::any_of(bucket_verdict.scoped.begin(), bucket_verdict.scoped.end(),
                     [](const Verdict& s) { return s.scope.kind == VerdictScope::Kind::kHalf; });
}

const Verdict* MostSpecific(const Verdict& bucket_verdict, const Problem& p) {
  if (const Verdict* exact = RefinementOf(bucket_verdict, p)) return exact;
  for (const Verdict& s : bucket_verdict.scoped) {
    if (s.scope.kind == VerdictScope::Kind::kHalf && s.scope.Contains(p)) return &s;
  }
  return &bucket_verdict;
}

std::optional<std::pair<VerdictScope, VerdictScope>> SplitBetween(const Bucket& bucket,
                                                                  const Problem& measured,
                                                                  const Problem& refined) {
  std::optional<std::pair<VerdictScope, VerdictScope>> best;
  double best_ratio = 0;
  for (char dim : {'m', 'n', 'k'}) {
    const DimClass& c = ClassOf(bucket, dim);
    if (c.log2_ceil < 2) continue;  // (1,2] and [1,1] hold one value
    const int64_t lo = int64_t{1} << (c.log2_ceil - 1);
    const int64_t hi = int64_t{1} << c.log2_ceil;
    const int64_t mid = lo + lo / 2;  // the half-octave: 3 * 2^(i-2)
    const int64_t a = DimOf(measured, dim), b = DimOf(refined, dim);
    if ((a <= mid) == (b <= mid)) continue;
    if (!HoldsClass(lo, mid, c.align) || !HoldsClass(mid, hi, c.align)) continue;
    const double ratio = std::abs(std::log(static_cast<double>(a) / static_cast<double>(b)));
    if (!best || ratio > best_ratio) {
      best = std::make_pair(VerdictScope::Half(dim, lo, mid), VerdictScope::Half(dim, mid, hi));
      best_ratio = ratio;
    }
  }
  return best;
}

Transfer TransferOf(const Verdict& v, const std::string& bucket_winner) {
  Transfer t;
  t.bucket_winner = bucket_winner;
  if (const CandidateResult* w = Timed(v, bucket_winner)) t.bucket_winner_seconds = w->median_seconds;
  for (const CandidateResult& r : v.results) {
    if (r.timed() && (t.best.empty() || r.median_seconds < t.best_seconds)) {
      t.best = r.name;
      t.best_seconds = r.median_seconds;
    }
  }
  return t;
}

}  // namespace arbiter
