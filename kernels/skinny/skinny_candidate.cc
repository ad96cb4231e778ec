#include "kernels/skinny/skinny_candidate.h"

#include "kernels/common/family.h"
#include "kernels/skinny/skinny.h"

namespace arbiter::kernels {

CandidateSpec MakeSkinnyCandidate() {
  return MakeFamily({
      .name = "skinny",
      .tier = 2,
      // Thread-block clusters: the K splits of a column strip add up in DSMEM.
      .arch = "sm_90+",
      .shape = {.max_m = kSkinnyMaxM},
      // Fixed-order reductions; the K partition follows N, K and the SM count only.
      .determinism = Determinism::kBatchInvariant,
      .members = HalfTypes({kSkinnyBudgetAbs, kSkinnyBudgetRel}),
      .launcher = kSkinny,
      .description =
          "M <= 32: B streamed once from DRAM into mma.sync fragments, K split in clusters",
  });
}

}  // namespace arbiter::kernels
