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

// A challenger's margin over the incumbent, the noise it must beat, and how both were measured.
struct Separation {
  bool separated = false;
  double margin = 0;
  std::string method;      // "paired over N rounds: ", "per-candidate spreads (...): " or empty
  std::string bound;       // with paired samples: the margin the rounds support
  std::string noise_text;  // " noise 2 x 1.0%"
};

Separation Separate(const CandidateResult& inc, const CandidateResult& chal,
                    const NoisePolicy& noise, const RaceSamples* samples) {
  Separation s;
  // The margin is the challenger's speedup over the incumbent (t_inc / t_chal - 1), not the
  // fraction of time saved: the latter can never exceed 100%, so an incumbent with a spread
  // over 50% could never be displaced however slow it was.
  s.margin = inc.median_seconds / chal.median_seconds - 1.0;
  double spread = std::max({inc.spread, chal.spread, noise.noise_floor});
  double tested = s.margin;  // what must beat the noise
  if (samples != nullptr) {
    const PairedRatio paired = samples->Compare(inc.name, chal.name);
    if (paired.pairs >= samples->min_pairs() && paired.pairs > 0) {
      // What scatters a whole round cancels in its ratio; what is left is
      // judged by the ratios' lower 97.5% bound (sample_stats.h), so a margin
      // counts only where nearly every round shows it, however the samples scatter.
      s.margin = paired.median - 1.0;
      tested = paired.low - 1.0;
      spread = noise.noise_floor;
      s.method = absl::StrCat("paired over ", paired.pairs, " rounds: ");
      s.bound = absl::StrCat(" (over ", Pct(tested), " in ", paired.pairs - paired.low_rank + 1,
                             " of them)");
    } else {
      // Too few rounds together (one stopped early or failed): each one's own figures.
      s.method = absl::StrCat("per-candidate spreads (", paired.pairs, " rounds paired, under ",
                              samples->min_pairs(), "): ");
    }
  }
  s.separated = tested > noise.noise_multiple * spread;
  s.noise_text = absl::StrFormat(" noise %.3g x %s", noise.noise_multiple, Pct(spread));
  return s;
}

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

  d.incumbent = inc->name;
  if (inc == fastest) {
    d.winner = fastest->name;
    d.winner_version = fastest->version;
    d.reason = absl::StrCat("fastest in budget (", Us(fastest->median_seconds), ", spread ",
                            Pct(fastest->spread), "), also the ", inc_kind);
    return d;
  }
  // Every challenger against the incumbent: those whose margin beats the noise may displace
  // it, and the fastest of them by median does. The fastest by median alone may scatter too
  // much to be separated while a slightly slower one is faster in every round. One slower
  // than the incumbent by median never displaces it (as where the incumbent is the fastest).
  const CandidateResult* winner = nullptr;
  Separation won;
  for (const CandidateResult& r : results) {
    if (&r == inc || !Meets(r, required) || !r.timed()) continue;
    if (r.median_seconds >= inc->median_seconds) continue;
    if (winner != nullptr && r.median_seconds >= winner->median_seconds) continue;
    Separation s = Separate(*inc, r, noise, samples);
    if (s.separated) {
      winner = &r;
      won = std::move(s);
    }
  }
  if (winner != nullptr) {
    d.winner = winner->name;
    d.winner_version = winner->version;
    d.reason = absl::StrCat(winner == fastest ? "fastest in budget: " : "fastest separated: ",
                            Us(winner->median_seconds), " vs ", inc_kind, " ", inc->name, " ",
                            Us(inc->median_seconds), ", ", won.method, "margin ", Pct(won.margin),
                            won.bound, " beats", won.noise_text);
    if (winner != fastest) {
      const Separation f = Separate(*inc, *fastest, noise, samples);
      absl::StrAppend(&d.reason, "; the fastest by median, ", fastest->name, " ",
                      Us(fastest->median_seconds), ", not separated (", f.method, "margin ",
                      Pct(f.margin), f.bound, " within", f.noise_text, ")");
    }
    return d;
  }
  const Separation f = Separate(*inc, *fastest, noise, samples);
  d.winner = inc->name;
  d.winner_version = inc->version;
  d.reason = absl::StrCat("not separated: ", fastest->name, " ", Us(fastest->median_seconds),
                          " vs ", inc_kind, " ", inc->name, " ", Us(inc->median_seconds), ", ",
                          f.method, "margin ", Pct(f.margin), f.bound, " within", f.noise_text,
                          "; the ", inc_kind, " stays");
  return d;
}

std::vector<std::string> UnsettledPair(const std::vector<CandidateResult>& results,
                                       Determinism required,
                                       const std::optional<std::string>& incumbent,
                                       const NoisePolicy& noise, const RaceSamples& samples) {
  const Decision d = Decide(results, required, incumbent, noise, &samples);
  if (d.winner.empty() || d.winner != d.incumbent) return {};
  const CandidateResult* fastest = nullptr;
  for (const CandidateResult& r : results) {
    if (!Meets(r, required) || !r.timed()) continue;
    if (fastest == nullptr || r.median_seconds < fastest->median_seconds) fastest = &r;
  }
  if (fastest == nullptr || fastest->name == d.incumbent) return {};
  const PairedRatio paired = samples.Compare(d.incumbent, fastest->name);
  if (paired.pairs == 0 || paired.pairs < samples.min_pairs()) return {};
  // Separation needs the ratios' lower bound past noise_multiple x the floor; a
  // median short of that can only scatter around it, so more rounds would buy
  // nothing but device time (and such a margin is the noise rule's own tie).
  if (paired.median - 1.0 <= noise.noise_multiple * noise.noise_floor) return {};
  return {d.incumbent, fastest->name};
}

}  // namespace arbiter
