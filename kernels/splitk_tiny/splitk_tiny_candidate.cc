#include "kernels/splitk_tiny/splitk_tiny_candidate.h"

#include "kernels/common/family.h"
#include "kernels/splitk_tiny/splitk_tiny.h"

namespace arbiter::kernels {

CandidateSpec MakeSplitKTinyCandidate() {
  return MakeFamily({
      .name = "splitk_tiny",
      .tier = 2,
      // Thread-block clusters add the K slices through distributed shared memory.
      .arch = "sm_90+",
      // The kernel takes M, N <= 64 and any K % 8 == 0; the registry races it
      // only where the H200 measured it competitive (splitk_tiny.h).
      .shape = {.max_m = kSplitKTinyRacedMaxM,
                .max_n = kSplitKTinyRacedMaxN,
                .min_k = kSplitKTinyRacedMinK,
                .align_k = kSplitKTinyAlignK},
      // No .tile: the CTA's tile is the whole C rounded up to 16 x 16, 32 or 64
      // (picked per shape), K split over up to one CTA per SM.
      // Fixed-order adds (warps, cluster ranks, clusters); the K partition
      // follows K and the SM count only.
      .determinism = Determinism::kRunToRun,
      .members = HalfTypes({kSplitKTinyBudgetAbs, kSplitKTinyBudgetRel}),
      .launcher = kSplitKTiny,
      .description = "M, N <= 64, long K: one launch, K slices added in clusters (DSMEM) "
                     "then across clusters by the last to arrive (sm_90)",
  });
}

}  // namespace arbiter::kernels
