// Selection is a pure function of the measured figures, the incumbent and the
// noise policy, so it is unit-tested with no device at all.
//
// The fastest candidate that passed the oracle wins - except that a challenger
// displaces the incumbent (the previous winner, else the tier default) only when
// its margin beats the measured noise:
//   t_incumbent / t_challenger - 1 > noise_multiple * max(spread_inc, spread_chal, noise_floor)
// Otherwise the incumbent stays and the reason says "not separated".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/contract.h"
#include "engine/verdict.h"

namespace arbiter {

struct NoisePolicy {
  double noise_multiple = 2.0;  // margin must exceed this many relative spreads
  double noise_floor = 0.01;    // smallest relative spread assumed (1%)
};

struct Decision {
  std::string winner;  // empty when nothing passed
  int winner_version = 0;
  std::string reason;
};

// The tier default among `results` meeting `required`: highest tier, then the
// earliest listed (registration order). Only candidates that are not failed or
// quarantined are considered. Empty when none.
std::string TierDefault(const std::vector<CandidateResult>& results, Determinism required);

// Decides among `results` whose determinism meets `required`.
// `incumbent` is the previous winner's name, if any.
Decision Decide(const std::vector<CandidateResult>& results, Determinism required,
                const std::optional<std::string>& incumbent, const NoisePolicy& noise);

}  // namespace arbiter
