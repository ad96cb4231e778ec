#include "kernels/mma_tiled/mma_tiled_candidate.h"

#include "kernels/common/family.h"
#include "kernels/mma_tiled/mma_tiled.h"

namespace arbiter::kernels {

CandidateSpec MakeMmaTiledCandidate() {
  return MakeFamily({
      .name = "mma_tiled",
      .tier = 2,
      // Tile unknown to the engine: the launcher picks 128x128 or 64x64 per shape
      // (mma_tiled.h), so only measurement ranks it at a shape.
      .determinism = Determinism::kBatchInvariant,
      .members = HalfTypes({kMmaTiledBudgetAbs, kMmaTiledBudgetRel}),
      .launcher = kMmaTiled,
      .description = "CTA-tiled mma.sync, 4-stage cp.async pipeline, ldmatrix (sm_80+)",
  });
}

}  // namespace arbiter::kernels
