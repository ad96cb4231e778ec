#include "kernels/skinny/skinny_candidate.h"

#include "kernels/common/family.h"
#include "kernels/skinny/skinny_stream.h"

namespace arbiter::kernels {

CandidateSpec MakeSkinnyCandidate() {
  return MakeFamily({
      .name = "skinny",
      // Version 3: copy offsets fixed per thread, paired token groups, cluster
      // rings at the one-group footprint (version 2: skinny_stream; the first
      // design was never registered).
      .version = 3,
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

CandidateSpec MakeSkinnyWideCandidate() {
  return MakeFamily({
      .name = "skinny_wide",
      .version = 1,
      .tier = 2,
      .arch = "sm_90+",
      // Where the H200 measured this config under cuBLAS's time (skinny_stream.h).
      .shape = {.min_m = kSkinnyStreamWideRacedMinM,
                .max_m = kSkinnyStreamWideRacedMaxM,
                .align_n = kSkinnyStreamWideRacedAlignN},
      // 256-column strips, up to 16 tokens (two groups of 8), K split until 2
      // CTAs per SM fill a wave; clusters of up to 8, else workspace slabs.
      .tile = {.rows = 16, .cols = 256, .max_split_k = 4096, .ctas_per_sm = 2},
      .determinism = Determinism::kBatchInvariant,
      .members = HalfTypes({kSkinnyStreamBudgetAbs, kSkinnyStreamBudgetRel}),
      .launcher = kSkinnyStreamWideLauncher,
      .description = "M 9-16: skinny_stream with 256-column strips (8 warps a CTA), "
                     "K split in clusters or workspace",
  });
}

}  // namespace arbiter::kernels
