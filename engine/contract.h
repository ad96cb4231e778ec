// What a candidate declares about itself: accuracy budget, determinism,
// architecture envelope and coverage. A contract is data; the registry checks it
// at registration and the arbiter checks the claims by running them.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "engine/dtype.h"
#include "engine/problem.h"
#include "engine/status.h"

namespace arbiter {

// Ordered: each level implies the ones below it.
enum class Determinism {
  kNondeterministic = 0,
  kRunToRun = 1,        // bitwise identical output on identical inputs
  kBatchInvariant = 2,  // also: a row of C does not depend on M
};
const char* DeterminismName(Determinism d);  // "nondeterministic", "run_to_run", "batch_invariant"
std::optional<Determinism> ParseDeterminism(std::string_view name);
std::ostream& operator<<(std::ostream& os, Determinism d);

// Error budget against the f64-accumulated reference on the same stored operands.
// An output passes when every element satisfies
//   |c - ref| <= abs + rel * sqrt(K) * max|ref| + u(dtype) * |ref|
// where u(dtype) is the storage roundoff of C (rounding C to its dtype is not the
// kernel's error). Relative error grows ~sqrt(K) with f32 accumulation, so the
// relative bound is declared per sqrt(K); a fixed absolute bound alone would
// reject a correct kernel at large K.
struct AccuracyBudget {
  double abs = 0;  // absolute bound, for outputs near zero; > 0, finite
  double rel = 0;  // relative bound per sqrt(K), against max|ref|; > 0, finite
};

// Shapes a candidate accepts, checked before any launch (never by trying).
struct ShapeCoverage {
  int64_t min_m = 1, max_m = INT64_MAX;
  int64_t min_n = 1, max_n = INT64_MAX;
  int64_t min_k = 1, max_k = INT64_MAX;
  int64_t align_m = 1, align_n = 1, align_k = 1;  // each dim must be a multiple
  bool operator==(const ShapeCoverage&) const = default;
};

// The tile of C one CTA computes, where the kernel fixes it. How well a shape
// fills whole tiles, and waves of them over the device's multiprocessors,
// changes from shape to shape inside a bucket (a 128-row tile is exact at 256
// rows and wastes 47% at 136), so a measurement at one shape says less about
// another for a candidate whose fill differs between them: refinement races
// such candidates (engine/refinement.h). rows == 0: unknown, as for a vendor
// library that picks its kernel per shape. A model of the launch that chooses
// what to measure, never who wins.
struct OutputTile {
  int64_t rows = 0;         // C rows per tile; 0: unknown
  int64_t cols = 0;         // C columns per tile
  int64_t max_split_k = 1;  // K split over up to this many CTAs per tile while slots are idle
  int64_t ctas_per_sm = 1;  // CTAs resident per multiprocessor: a wave is that many per SM
  // Unknown because a vendor heuristic picks the kernel (and tile) anew at every
  // shape: its time at one shape of a bucket says little about another (on the
  // H200, cuBLASLt's heuristic ranks traded places by 4-20% inside one bucket).
  bool per_shape = false;
  bool known() const { return rows > 0; }
  bool operator==(const OutputTile&) const = default;
};

// "128x256", "64x256/k8" (split over up to 8), or "unknown".
std::string TileName(const OutputTile& tile);

// Useful over launched work at `p`: C's area over the area of the tiles that
// cover it, times - where `multiprocessors` > 0 - the share of the launch's
// waves of CTA slots that hold a CTA (the K split taken as large as fills one
// wave, up to max_split_k). 1 where the tile is unknown.
double TileEfficiency(const OutputTile& tile, const Problem& p, int multiprocessors);

// One member of a contract family: a single dtype's entry point. Members of a
// family must agree on everything except `entry` and `accuracy`.
struct MemberContract {
  DType dtype = DType::kF32;
  std::string entry;                // bound entry point, for logs only (never a key)
  AccuracyBudget accuracy;
  Determinism determinism = Determinism::kNondeterministic;
  std::string arch;                 // envelope: "cpu", "sm_80+", "sm_90a", ...
  ShapeCoverage shape;
  OutputTile tile;                  // unknown by default
};

std::ostream& operator<<(std::ostream& os, const MemberContract& c);

// INVALID_ARGUMENT naming the offending field, or OK.
absl::Status ValidateMemberContract(const MemberContract& c);

// Empty when `shape` covers the problem's dims; else why not ("K=7 is not a multiple of 8").
std::string CoverageGap(const ShapeCoverage& shape, const Problem& p);

// The per-element tolerance described at AccuracyBudget.
double Tolerance(const AccuracyBudget& budget, DType dtype, int64_t k, double max_abs_ref,
                 double abs_ref);

}  // namespace arbiter
