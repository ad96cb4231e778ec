#include "engine/selection.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace arbiter {

namespace {

bool Meets(const CandidateResult& r, Determinism required) {
  return static_cast<int>(r.determinism) >= static_cast<int>(required);
}

const CandidateResult* Find(const std::vector<CandidateResult>& results, std::string_view name) {
  for (const CandidateResult& r : results) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string Us(double seconds) { return absl::StrFormat("%.2fus", seconds * 1e6); }
std::string Pct(double fraction) { return absl::StrFormat("%.1f%%", fraction * 100); }

}  // namespace

Decision Decide(const std::vector<CandidateResult>& results, Determinism required,
                const std::optional<std::string>& incumbent, const NoisePolicy& noise,
                const RaceSamples* samples) {
  Decision d;
  const CandidateResult* fastest = nullptr;
  for (const CandidateResult& r : results) {
    if (!Meets(r, required) || !r.timed()) continue;
    if (fastest == nullptr || r.median_seconds < fastest->median_seconds) fastest = &r;
  }
  if (fastest == nullptr) {
    d.reason = absl::StrCat("no candidate meeting ", DeterminismName(required),
                            " passed the oracle and was timed");
    return d;
  }

  // The incumbent: the previous winner if it still passed, else the tier default among the timed.
  const CandidateResult* inc = nullptr;
  std::string inc_kind;
  if (incumbent) {
    const CandidateResult* prev = Find(results, *incumbent);
    if (prev && prev->timed() && Meets(*prev, required)) {
      inc = prev;
      inc_kind = "previous winner";
    }
  }
  if (inc == nullptr) {
    // Not empty: `fastest` is among them.
    inc = &*TierDefault(
        results, [&](const CandidateResult& r) { return Meets(r, required) && r.timed(); },
        &CandidateResult::tier);
    inc_kind = "tier default";
  }

  if (inc == fastest) {
    d.winner = fastest->name;
    d.winner_version = fastest->version;
    d.reason = absl::StrCat("fastest in budget (", Us(fastest->median_seconds), ", spread ",
                            Pct(fastest->spread), "), also the ", inc_kind);
    return d;
  }
  // The margin is the challenger's speedup over the incumbent (t_inc / t_chal - 1), not the
  // fraction of time saved: the latter can never exceed 100%, so an incumbent with a spread
  // over 50% could never be displaced however slow it was.
  double margin = inc->median_seconds / fastest->median_seconds - 1.0;
  double spread = std::max({inc->spread, fastest->spread, noise.noise_floor});
  double tested = margin;  // what must beat the noise
  std::string method;      // how margin and noise were measured
  std::string bound;       // with paired samples: the margin the rounds support
  if (samples != nullptr) {
    const PairedRatio paired = samples->Compare(inc->name, fastest->name);
    if (paired.pairs >= samples->min_pairs() && paired.pairs > 0) {
      // What scatters a whole round cancels in its ratio; what is left is
      // judged by the ratios' lower 97.5% bound (sample_stats.h), so a margin
      // counts only where nearly every round shows it, however the samples scatter.
      margin = paired.median - 1.0;
      tested = paired.low - 1.0;
      spread = noise.noise_floor;
      method = absl::StrCat("paired over ", paired.pairs, " rounds: ");
      bound = absl::StrCat(" (over ", Pct(tested), " in ", paired.pairs - paired.low_rank + 1,
                           " of them)");
    } else {
      // Too few rounds together (one stopped early or failed): each one's own figures.
      method = absl::StrCat("per-candidate spreads (", paired.pairs, " rounds paired, under ",
                            samples->min_pairs(), "): ");
    }
  }
  const double needed = noise.noise_multiple * spread;
  const std::string noise_text =
      absl::StrFormat(" noise %.3g x %s", noise.noise_multiple, Pct(spread));
  if (tested > needed) {
    d.winner = fastest->name;
    d.winner_version = fastest->version;
    d.reason = absl::StrCat("fastest in budget: ", Us(fastest->median_seconds), " vs ", inc_kind,
                            " ", inc->name, " ", Us(inc->median_seconds), ", ", method, "margin ",
                            Pct(margin), bound, " beats", noise_text);
  } else {
    d.winner = inc->name;
    d.winner_version = inc->version;
    d.reason = absl::StrCat("not separated: ", fastest->name, " ", Us(fastest->median_seconds),
                            " vs ", inc_kind, " ", inc->name, " ", Us(inc->median_seconds), ", ",
                            method, "margin ", Pct(margin), bound, " within", noise_text, "; the ",
                            inc_kind, " stays");
  }
  return d;
}

}  // namespace arbiter
