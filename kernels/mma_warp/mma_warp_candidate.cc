#include "kernels/mma_warp/mma_warp_candidate.h"

#include "kernels/common/family.h"
#include "kernels/mma_warp/mma_warp.h"

namespace arbiter::kernels {

CandidateSpec MakeMmaWarpCandidate() {
  return MakeFamily({
      .name = "mma_warp",
      .tier = 1,
      // A 128-thread block per 16 x 32 strip of C (mma_warp.cu), no shared
      // memory: up to 16 resident per SM by the 2048-thread limit.
      .tile = {.rows = 16, .cols = 32, .ctas_per_sm = 16},
      .determinism = Determinism::kBatchInvariant,
      .members = HalfTypes({kMmaWarpBudgetAbs, kMmaWarpBudgetRel}),
      .launcher = kMmaWarp,
      .description = "one warp per 16x8 tile, mma.sync m16n8k16, K serial in registers (sm_80+)",
  });
}

}  // namespace arbiter::kernels
