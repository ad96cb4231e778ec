#include "kernels/wgmma_ragged/wgmma_ragged_candidate.h"

#include "kernels/common/family.h"
#include "kernels/wgmma_ragged/wgmma_ragged.h"

namespace arbiter::kernels {

// The contract, and why (wgmma_ragged.h has the design):
// - arch sm_90a: wgmma and setmaxnreg exist only there (no PTX to JIT elsewhere);
// - K % 8: A goes through TMA (16-byte row strides); any M and N. N % 8 == 0
//   and operands it cannot address are declined by the launcher
//   (kWgmmaRagged.unsupported): no coverage field says "N % 8 != 0";
// - batch invariant: one CTA per 128 x 256 tile of C (fixed, never chosen
//   from M), K walked in a fixed order, no atomics;
// - tile 128 x 256, one CTA per SM (the stages fill shared memory), no split.
CandidateSpec MakeWgmmaRaggedCandidate() {
  const ShapeCoverage shape = {.align_k = 8};
  const OutputTile tile = {.rows = kWgmmaRaggedTileM, .cols = kWgmmaRaggedTileN};
  return MakeFamily({.name = "wgmma_ragged", .version = 1, .tier = 3, .arch = "sm_90a",
                     .shape = shape, .tile = tile, .determinism = Determinism::kBatchInvariant,
                     .members = HalfTypes({kWgmmaRaggedBudgetAbs, kWgmmaRaggedBudgetRel}),
                     .launcher = kWgmmaRagged,
                     .description = "ragged N (not a multiple of 8): TMA A, B in aligned 16-byte "
                                    "loads realigned in registers, wgmma 128x256, no padded copies"});
}

}  // namespace arbiter::kernels
