// Refinement and splits, the decisions only: which candidates race an exact
// shape inside an already measured bucket, which of a bucket's verdicts serves a
// shape, and where a bucket splits when a refinement disagrees with it. Pure
// functions of the verdicts handed to them (no store, no device), so they are
// unit-tested with neither; the Tuner measures and stores what they decide.
//
// A bucket's verdict is measured at one shape and serves all of the bucket.
// A shape that is hot (served from the bucket's verdict `hot_after` times) or
// named by `tune` gets a verdict of its own, raced among the bucket verdict's
// leaders at that exact shape with the same oracle, claims and lead safety.
// The fastest there serves it (DecideRefinement): the bucket's winner was
// measured at another shape, so it is no incumbent here. Where the fastest beat
// the bucket's winner beyond the noise, the bucket splits in two half-octaves on
// the dimension that separates the two shapes: the half holding the bucket's
// measured shape keeps the bucket's figures, the other half is raced in full at
// the refined shape.
//
// Thread-safe: free functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/bucket.h"
#include "engine/problem.h"
#include "engine/selection.h"
#include "engine/verdict.h"

namespace arbiter {

struct RefineOptions {
  // A shape served from a verdict measured at another shape this many times is
  // refined in the background; 0 never refines on use (tune still does).
  int64_t hot_after = 100;
  // Shapes counted at most; past it the counts start again (hot_shapes.h).
  size_t hot_capacity = 4096;
  // Leaders: timed candidates whose median is within this fraction of the winner's.
  double leader_margin = 0.25;
  // At most this many of the winner and those within the margin race a
  // refinement; the fastest at each stricter determinism level (two at most) come
  // on top. Six: on the H200 the bucket winner's close contenders are cuBLAS's
  // other entry points (cuBLASLt's heuristics h0-h3, padded) and wgmma, whose
  // order changes from shape to shape inside a bucket (a heuristic picks another
  // kernel at each shape); with four, the one a shape preferred was often not
  // raced there. Four cost a median 5.7 ms of device time per refined shape
  // (H200, dims <= 4096, goal <= 20 ms); each entrant adds about its share.
  int max_leaders = 6;
};

// The names a refinement of `bucket_verdict` races: its winner, the fastest
// timed candidate at each stricter determinism level (so a request that
// requires one still finds a refined figure), then the other timed candidates
// within leader_margin of the winner, fastest first, until the winner and these
// number max_leaders.
std::vector<std::string> Leaders(const Verdict& bucket_verdict, const RefineOptions& options);

// Who serves a refined shape, among `results` (its race at that shape) meeting
// `required`: the fastest there. The bucket's winner is no incumbent at a shape
// it was not measured at (it won at another shape, whatever it does here);
// only `previous`, the winner of an earlier refinement of the same shape, is:
// it stays unless beaten beyond the noise, as in Decide. Except where the
// fastest's own figures are noise (an interquartile range wider than its
// median): then Decide with `fallback` (the bucket's winner) as the incumbent,
// since such a median says nothing about which is faster. `samples` (may be
// null), the race's samples by round, go to Decide where it decides.
Decision DecideRefinement(const std::vector<CandidateResult>& results, Determinism required,
                          const std::optional<std::string>& previous,
                          const std::optional<std::string>& fallback, const NoisePolicy& noise,
                          const RaceSamples* samples = nullptr);

// The verdict among a bucket's (`bucket_verdict` and its `scoped` ones) that
// serves `p`: a refinement at exactly `p`, else the split half holding `p`, else
// the bucket's own. Never null.
const Verdict* MostSpecific(const Verdict& bucket_verdict, const Problem& p);

// The refinement of `p` among the bucket's scoped verdicts, if there is one.
const Verdict* RefinementOf(const Verdict& bucket_verdict, const Problem& p);

// Whether `bucket_verdict` has been split (it holds half verdicts).
bool IsSplit(const Verdict& bucket_verdict);

// The two half-octaves of `bucket` on the dimension where `measured` and
// `refined` fall in different halves (where several do, the one where the two
// shapes differ most by ratio): (lo, mid] first, (mid, hi] second. nullopt when
// no dimension separates them or a half would hold no value of the bucket's
// alignment class for that dimension.
std::optional<std::pair<VerdictScope, VerdictScope>> SplitBetween(const Bucket& bucket,
                                                                  const Problem& measured,
                                                                  const Problem& refined);

// How `bucket_winner` fared in the race behind `v` (a verdict of its bucket,
// measured at one of its shapes) against the fastest there.
Transfer TransferOf(const Verdict& refined, const std::string& bucket_winner);

}  // namespace arbiter
