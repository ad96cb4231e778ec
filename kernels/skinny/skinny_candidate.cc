#include "kernels/skinny/skinny_candidate.h"

#include "kernels/common/family.h"
#include "kernels/skinny/skinny_stream.h"

namespace arbiter::kernels {

CandidateSpec MakeSkinnyCandidate() {
  return MakeFamily({
      .name = "skinny",
      // Version 2: skinny_stream (the first design was never registered).
      .version = 2,
      .tier = 2,
      // Thread-block clusters: the K splits of a column strip add up in DSMEM.
      .arch = "sm_90+",
      // The kernel takes M <= 64 and any N; the registry races it only where
      // the H200 measured it competitive (skinny_stream.h).
      .shape = {.max_m = kSkinnyStreamRacedMaxM, .align_n = kSkinnyStreamRacedAlignN},
      // The default config: a CTA per 128-column strip, 8 tokens per mma, K
      // split until 2 CTAs per SM fill a wave (kMaxSplits 4096 in skinny_stream.cu).
      .tile = {.rows = 8, .cols = 128, .max_split_k = 4096, .ctas_per_sm = 2},
      // Fixed-order reductions; the K partition follows N, K and the SM count only.
      .determinism = Determinism::kBatchInvariant,
      .members = HalfTypes({kSkinnyStreamBudgetAbs, kSkinnyStreamBudgetRel}),
      .launcher = kSkinnyStream,
      .description = "M <= 8: B streamed once from DRAM in 512-byte row runs into mma.sync, "
                     "K split in clusters",
  });
}

}  // namespace arbiter::kernels
