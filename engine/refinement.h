// Refinement and splits, the decisions only: which candidates race an exact
// shape inside an already measured bucket, which of a bucket's verdicts serves a
// shape, and where a bucket splits when a refinement disagrees with it. Pure
// functions of the verdicts handed to them (no store, no device), so they are
// unit-tested with neither; the Tuner measures and stores what they decide.
//
// A bucket's verdict is measured at one shape and serves all of the bucket.
// A shape that is hot (served from the bucket's verdict `hot_after` times) or
// named by `tune` gets a verdict of its own, raced among the bucket verdict's
// leaders (Leaders) and the candidates whose declared tile fills that shape
// differently (TileEntrants) at that exact shape, with the same oracle, claims
// and lead safety. The fastest there serves it (DecideRefinement): the bucket's
// winner was measured at another shape, so it is no incumbent here. Where the
// fastest beat the bucket's winner beyond the noise, the bucket splits in two
// half-octaves on the dimension that separates the two shapes: the half holding
// the bucket's measured shape keeps the bucket's figures, the other half takes
// the refinement's race at the refined shape.
//
// Thread-safe: free functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/bucket.h"
#include "engine/contract.h"
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
  // refinement; the fastest at each stricter determinism level, and of each
  // determinism class within tile_margin of the winner (Leaders), come on top.
  // Six: on the H200 the bucket winner's close contenders are cuBLAS's other
  // entry points (cuBLASLt's heuristics h0-h3, padded) and wgmma, whose
  // order changes from shape to shape inside a bucket (a heuristic picks another
  // kernel at each shape); with four, the one a shape preferred was often not
  // raced there. Four cost a median 5.7 ms of device time per refined shape
  // (H200, dims <= 4096, goal <= 20 ms); each entrant adds about its share.
  int max_leaders = 6;
  // Tile entrants (TileEntrants): a declared tile's efficiency at the refined
  // shape over this fraction off its efficiency at the measured shape changes
  // what the measurement there says.
  double tile_change = 0.15;
  // Tile entrants race only while predicted (their time at the measured shape
  // over their efficiency's change) within this fraction of the best predicted;
  // the fastest of each tile shape, while measured within it of the fastest.
  double tile_margin = 1.0;
  // At most this many tile entrants on top of the leaders, best predicted first.
  int max_tile_entrants = 4;
  // Device time of a refinement race's timed samples (each entrant still gets
  // MeasureOptions::min_samples): the bucket race's budget scaled to the entrants
  // over the eligible, and at most this. On the H200 a refined shape at dims <=
  // 4096 cost a median 7.7 ms, its worst 29-40 ms where a split raced every
  // candidate a second time (goal <= 20 ms).
  double device_budget_seconds = 0.015;
  // The share of that budget its timed rounds leave to a close race's extra
  // rounds (MeasureOptions::extend_reserve). On the H200 (15ae402) the rounds
  // of 11 entrants of 50 us spent all 15 ms at 1x12296x6152, leaving a close
  // pick 0 extra rounds; a third leaves ~5 ms, some 40 rounds of a 60 us pair.
  double close_race_reserve = 1.0 / 3;
};

// The names a refinement of `bucket_verdict` races: its winner, the fastest
// timed candidate at each stricter determinism level (so a request that
// requires one still finds a refined figure), then the other timed candidates
// within leader_margin of the winner, fastest first, until the winner and these
// number max_leaders; and on top, the fastest of each determinism class (exactly
// that class: the nondeterministic one's is what only a request allowing
// nondeterminism may be served) while within tile_margin of the winner.
std::vector<std::string> Leaders(const Verdict& bucket_verdict, const RefineOptions& options);

// A candidate a refinement races beyond the leaders, and why.
struct TileEntrant {
  std::string name;
  std::string why;
};

// The candidates a refinement of `bucket_verdict` at `p` races on top of
// `leaders`, because a declared tile (`tiles`, by name; absent or unknown:
// judged by measurement alone, as Leaders does) fills `p` differently from the
// measured shape, on a device of `multiprocessors` (0: tiles' fill only, no
// waves), or because a vendor heuristic chooses its kernel per shape
// (OutputTile::per_shape), so its rank at the measured shape does not carry.
// Among the candidates the verdict timed: one chosen per shape while its median
// is within tile_margin of the fastest's; one whose tile efficiency
// changes by over tile_change; one whose tile fills `p` better than the
// winner's; the fastest of each tile shape; and one within leader_margin of
// the winner once the winner's own change of efficiency is counted (a 128-row
// winner measured at 256 rows wastes 47% at 136). Each of these but the fastest
// of a tile shape races only while its predicted time - its median over its
// efficiency's change - is within tile_margin of the best predicted; the fastest
// of a tile shape, while its median is within tile_margin of the fastest's.
// Best predicted first, at most max_tile_entrants.
std::vector<TileEntrant> TileEntrants(const Verdict& bucket_verdict, const Problem& p,
                                      const std::vector<std::string>& leaders,
                                      const std::map<std::string, OutputTile>& tiles,
                                      int multiprocessors, const RefineOptions& options);

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

// Where a refinement's pick is close enough that more rounds should make it:
// the fastest by median and the runner-up (among `results` meeting `required`),
// when they were paired in at least min_pairs rounds and their per-round ratios
// neither order them (the sign test's 95% bounds hold 1) nor confine their
// difference within the noise (both bounds within noise_multiple x noise_floor
// of 1). DecideRefinement serves the fastest by median with no incumbent, so
// such a pair is decided by a coin flip unless more rounds are timed: on the
// H200, cuBLASLt h0 and h2 at 1032x2056x2056 read 30.08 and 30.10 us in a
// refinement's rounds and 3.3% apart over 100 paired rounds. Returns {fastest,
// runner-up}; empty otherwise.
std::vector<std::string> UnsettledPick(const std::vector<CandidateResult>& results,
                                       Determinism required, const NoisePolicy& noise,
                                       const RaceSamples& samples);

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
