// Deciding a verdict is a pure function of the measured figures, the incumbent
// and the noise policy, so it is unit-tested with no device at all.
//
// The fastest candidate that passed the oracle wins - except that a challenger
// displaces the incumbent (the previous winner, else the tier default) only when
// its margin beats the measured noise. Every challenger faster by median than the
// incumbent is compared with it; of those whose margin beats the noise, the
// fastest by median wins (the fastest may scatter too much to be separated while
// the next is faster in every round). Where the race's samples are at hand and
// the two were sampled together in at least min_pairs rounds, a challenger is
// judged on the per-round ratios r = t_incumbent / t_challenger (sample_stats.h):
//   low(r) - 1 > noise_multiple * noise_floor
// where low(r) is the lower 97.5% confidence bound of their median by the sign
// test (e.g. the 2nd smallest of 10 ratios): what scatters every sample of a
// round alike cancels in its ratio, and what is left must show in nearly every
// round, however bimodal one candidate's samples are. Otherwise (a verdict re-decided from its
// stored figures, too few rounds together), on each candidate's own figures:
//   t_incumbent / t_challenger - 1 > noise_multiple * max(spread_inc, spread_chal, noise_floor)
// Either way the reason says which was used, and where no challenger's margin
// beats the noise the incumbent stays and the reason says "not separated",
// naming the fastest.
//
// Also here: the tier-default rule (the one order used where nothing measured
// decides) and `Selection`, what serves a problem and why.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/bucket.h"
#include "engine/candidate.h"
#include "engine/contract.h"
#include "engine/sample_stats.h"
#include "engine/verdict.h"

namespace arbiter {

// What serves a problem, and why.
struct Selection {
  std::string candidate;
  int version = 0;
  // The chosen candidate's member for the problem's dtype: the registry owns it,
  // and it lives as long as the Arbiter that selected it.
  const CandidateMember* member = nullptr;
  VerdictSource source = VerdictSource::kTierDefault;
  Bucket bucket;
  std::string reason;
  std::optional<Verdict> verdict;  // the measured verdict it came from, if any
};

struct NoisePolicy {
  double noise_multiple = 2.0;  // margin must exceed this many relative spreads
  double noise_floor = 0.01;    // smallest relative spread assumed (1%)
};

struct Decision {
  std::string winner;  // empty when nothing passed
  int winner_version = 0;
  std::string reason;
  std::string incumbent;  // the incumbent it decided against (empty when nothing passed)
};

// The tier default, the one order used where nothing measured decides: among
// the `candidates` that `allowed` admits, the highest tier; on a tie, the
// earliest listed - registration order. `tier` gives an element's tier (a
// callable or a member pointer). Returns candidates.end() when none is allowed.
template <typename Candidates, typename Allowed, typename TierOf>
auto TierDefault(const Candidates& candidates, Allowed allowed, TierOf tier) {
  auto best = candidates.end();
  for (auto it = candidates.begin(); it != candidates.end(); ++it) {
    if (!allowed(*it)) continue;
    // Strictly higher only: on a tie the earliest listed stays.
    if (best == candidates.end() || std::invoke(tier, *it) > std::invoke(tier, *best)) best = it;
  }
  return best;
}

// Decides among `results` whose determinism meets `required`.
// `incumbent` is the previous winner's name, if any; `samples` (may be null)
// the samples of the race that produced `results`, by round.
Decision Decide(const std::vector<CandidateResult>& results, Determinism required,
                const std::optional<std::string>& incumbent, const NoisePolicy& noise,
                const RaceSamples* samples = nullptr);

// Where a race is close enough that more rounds should decide it: Decide (on
// `samples`) leaves the incumbent because the fastest by median was not
// separated, yet the two were paired in at least min_pairs rounds and the median
// of their per-round ratios puts the fastest ahead by more than the margin a
// separation needs (noise_multiple x noise_floor): more rounds can only tighten
// the bound towards that median, so a smaller one is never extended.
// Returns {incumbent, fastest} then; empty otherwise (no coin flip is ever
// settled by the median alone: with no more rounds, the incumbent stays).
std::vector<std::string> UnsettledPair(const std::vector<CandidateResult>& results,
                                       Determinism required,
                                       const std::optional<std::string>& incumbent,
                                       const NoisePolicy& noise, const RaceSamples& samples);

}  // namespace arbiter
