#include "kernels/mma_tiled/mma_tiled_candidate.h"

#include "kernels/common/family.h"
#include "kernels/mma_tiled/mma_tiled.h"

namespace arbiter::kernels {

CandidateSpec MakeMmaTiledCandidate() {
  return MakeFamily({
      .name = "mma_tiled",
      .tier = 2,
      .determinism = Determinism::kBatchInvariant,
      .members = HalfTypes({kMmaTiledBudgetAbs, kMmaTiledBudgetRel}),
      .launcher = kMmaTiled,
      .description = "CTA-tiled mma.sync, 4-stage cp.async pipeline, ldmatrix (sm_80+)",
  });
}

}  // namespace arbiter::kernels
