#include "kernels/skinny/skinny_candidate.h"

#include "kernels/common/family.h"
#include "kernels/skinny/skinny_stream.h"

namespace arbiter::kernels {
namespace {

// What skinny and skinny_wide share: the same kernel (skinny_stream) with
// another config, so the same arch, contract and determinism.
Family SkinnyStreamFamily() {
  Family f;
  f.tier = 2;
  // Thread-block clusters: the K splits of a column strip add up in DSMEM.
  f.arch = "sm_90+";
  // Fixed-order reductions; the K partition follows N, K and the SM count only.
  f.determinism = Determinism::kBatchInvariant;
  f.members = HalfTypes({kSkinnyStreamBudgetAbs, kSkinnyStreamBudgetRel});
  return f;
}

}  // namespace

CandidateSpec MakeSkinnyCandidate() {
  Family f = SkinnyStreamFamily();
  f.name = "skinny";
  // Version 3: copy offsets fixed per thread, paired token groups, cluster
  // rings at the one-group footprint (version 2: skinny_stream; the first
  // design was never registered).
  f.version = 3;
  // The kernel takes M <= 64 and any N; the registry races it only where
  // the H200 measured it competitive (skinny_stream.h).
  f.shape = {.max_m = kSkinnyStreamRacedMaxM, .align_n = kSkinnyStreamRacedAlignN};
  // The default config: a CTA per 128-column strip, 8 tokens per mma, K
  // split until 2 CTAs per SM fill a wave (kMaxSplits 4096 in skinny_stream.cu).
  f.tile = {.rows = 8, .cols = 128, .max_split_k = 4096, .ctas_per_sm = 2};
  f.launcher = kSkinnyStream;
  f.description =
      "M <= 8: B streamed once from DRAM in 512-byte row runs into mma.sync, K split in clusters";
  return MakeFamily(f);
}

CandidateSpec MakeSkinnyWideCandidate() {
  Family f = SkinnyStreamFamily();
  f.name = "skinny_wide";
  f.version = 1;
  // Where the H200 measured this config under cuBLAS's time (skinny_stream.h).
  f.shape = {.min_m = kSkinnyStreamWideRacedMinM,
             .max_m = kSkinnyStreamWideRacedMaxM,
             .align_n = kSkinnyStreamWideRacedAlignN};
  // 256-column strips, up to 16 tokens (two groups of 8), K split until 2
  // CTAs per SM fill a wave; clusters of up to 8, else workspace slabs.
  f.tile = {.rows = 16, .cols = 256, .max_split_k = 4096, .ctas_per_sm = 2};
  f.launcher = kSkinnyStreamWideLauncher;
  f.description =
      "M 9-16: skinny_stream with 256-column strips (8 warps a CTA), K split in clusters or "
      "workspace";
  return MakeFamily(f);
}

CandidateSpec MakeSkinnyRaggedCandidate() {
  Family f = SkinnyStreamFamily();
  f.name = "skinny_ragged";
  f.version = 1;
  // 1-16 rows; the launcher declines N % 8 == 0 (skinny's and skinny_wide's
  // ground) and a B that is not 16-byte aligned (kSkinnyStreamRaggedLauncher's
  // unsupported): no coverage field says "N % 8 != 0".
  f.shape = {.max_m = kSkinnyStreamRaggedMaxM};
  // The default's strips and plan: 128 columns, up to 16 tokens (two groups
  // of 8), K split until 2 CTAs per SM fill a wave.
  f.tile = {.rows = 16, .cols = 128, .max_split_k = 4096, .ctas_per_sm = 2};
  f.launcher = kSkinnyStreamRaggedLauncher;
  f.description =
      "M <= 16, ragged N (odd too): B rows as aligned 16-byte spans, read at each row's "
      "misalignment into mma.sync, K split in clusters";
  return MakeFamily(f);
}

}  // namespace arbiter::kernels
