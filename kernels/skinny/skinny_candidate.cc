#include "kernels/skinny/skinny_candidate.h"

#include "kernels/common/family.h"
#include "kernels/skinny/skinny_stream.h"

namespace arbiter::kernels {
namespace {

// One registered config of skinny_stream. The configs share the kernel, so the
// same tier, arch, contract and determinism; each has its own name, version,
// coverage (where the H200 measured it competitive: skinny_stream.h), strip
// tile and launcher.
struct SkinnyConfig {
  const char* name;
  int version;
  ShapeCoverage shape;
  OutputTile tile;
  const Launcher& launcher;
  const char* description;
};

CandidateSpec MakeSkinnyConfig(const SkinnyConfig& config) {
  Family f;
  f.name = config.name;
  f.version = config.version;
  f.tier = 2;
  // Thread-block clusters: the K splits of a column strip add up in DSMEM.
  f.arch = "sm_90+";
  // Fixed-order reductions; the K partition follows N, K and the SM count only.
  f.determinism = Determinism::kBatchInvariant;
  f.members = HalfTypes({kSkinnyStreamBudgetAbs, kSkinnyStreamBudgetRel});
  f.shape = config.shape;
  f.tile = config.tile;
  f.launcher = config.launcher;
  f.description = config.description;
  return MakeFamily(f);
}

}  // namespace

CandidateSpec MakeSkinnyCandidate() {
  // Version 3: copy offsets fixed per thread, paired token groups, cluster
  // rings at the one-group footprint (version 2: skinny_stream; the first
  // design was never registered). The kernel takes M <= 64 and any N; it is
  // raced at M <= 8 of an even N. The default config: a CTA per 128-column
  // strip, 8 tokens per mma, K split until 2 CTAs per SM fill a wave
  // (kMaxSplits 4096 in skinny_stream.cu).
  return MakeSkinnyConfig(
      {"skinny", 3, {.max_m = kSkinnyStreamRacedMaxM, .align_n = kSkinnyStreamRacedAlignN},
       {.rows = 8, .cols = 128, .max_split_k = 4096, .ctas_per_sm = 2}, kSkinnyStream,
       "M <= 8: B streamed once from DRAM in 512-byte row runs into mma.sync, K split in clusters"});
}

CandidateSpec MakeSkinnyWideCandidate() {
  // 256-column strips, up to 16 tokens (two groups of 8), K split until 2 CTAs
  // per SM fill a wave; clusters of up to 8, else workspace slabs.
  return MakeSkinnyConfig(
      {"skinny_wide", 1,
       {.min_m = kSkinnyStreamWideRacedMinM,
        .max_m = kSkinnyStreamWideRacedMaxM,
        .align_n = kSkinnyStreamWideRacedAlignN},
       {.rows = 16, .cols = 256, .max_split_k = 4096, .ctas_per_sm = 2}, kSkinnyStreamWideLauncher,
       "M 9-16: skinny_stream with 256-column strips (8 warps a CTA), K split in clusters or "
       "workspace"});
}

CandidateSpec MakeSkinnyRaggedCandidate() {
  // 1-16 rows; the launcher declines N % 8 == 0 (skinny's and skinny_wide's
  // ground) and a B that is not 16-byte aligned (kSkinnyStreamRaggedLauncher's
  // unsupported): no coverage field says "N % 8 != 0". The default's strips and
  // plan: 128 columns, up to 16 tokens (two groups of 8), K split until 2 CTAs
  // per SM fill a wave.
  return MakeSkinnyConfig(
      {"skinny_ragged", 1, {.max_m = kSkinnyStreamRaggedMaxM},
       {.rows = 16, .cols = 128, .max_split_k = 4096, .ctas_per_sm = 2},
       kSkinnyStreamRaggedLauncher,
       "M <= 16, ragged N (odd too): B rows as aligned 16-byte spans, read at each row's "
       "misalignment into mma.sync, K split in clusters"});
}

}  // namespace arbiter::kernels
