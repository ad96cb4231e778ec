// Refinement and splits, the decisions only: which candidates race an exact
// shape inside an already measured bucket, which of a bucket's verdicts serves a
// shape, and where a bucket splits when a refinement disagrees with it. Pure
// functions of the verdicts handed to them (no store, no device), so they are
// unit-tested with neither; the Tuner measures and stores what they decide.
//
// A bucket's verdict is measured at one shape and serves all of the bucket.
// A shape that is hot (served from the bucket's verdict `hot_after` times) or
// named by `tune` gets a verdict of its own, raced among the bucket verdict's
// leaders at that exact shape with the same oracle, claims and lead safety
// (the bucket's winner is the incumbent). Where that refined verdict's winner
// differs from the bucket's - it beat the bucket winner beyond the noise - the
// bucket splits in two half-octaves on the dimension that separates the two
// shapes: the half holding the bucket's measured shape keeps the bucket's
// figures, the other half is raced in full at the refined shape.
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
  // on top.
  int max_leaders = 4;
};

// The names a refinement of `bucket_verdict` races: its winner, the fastest
// timed candidate at each stricter determinism level (so a request that
// requires one still finds a refined figure), then the other timed candidates
// within leader_margin of the winner, fastest first, until the winner and these
// number max_leaders.
std::vector<std::string> Leaders(const Verdict& bucket_verdict, const RefineOptions& options);

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
