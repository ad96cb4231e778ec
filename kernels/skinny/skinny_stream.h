// Launcher of skinny_stream: C[M, N] = A[M, K] B[K, N] for M in 1..64 against a
// wide weight B (decode and small-batch transformer GEMMs), where the work is
// bound by streaming B once from DRAM (1 x 4096 x 4096 bf16 moves 32 MiB for
// 33 MFLOP). So the kernel is built around the stream of B: each warp copies
// whole 512-byte runs of one k row (16-byte cp.async per lane) into a
// shared-memory ring of 32-row stages (stages - 1 in flight per CTA, 2 CTAs per
// SM by default), ldmatrix.trans feeds the tensor cores (C^T = B^T A^T on
// mma.sync m16n8k16, 8 tokens of A per instruction), K is split across CTAs until
// one wave fills the SMs, and the splits are added in a fixed order (in a
// thread-block cluster, or through workspace slabs). f16 and bf16 in, f32
// accumulation, C in the input dtype; any N and K, nothing copied: a ragged N
// takes narrower copies (4-byte at even N, 2-byte elements at odd N), or, in the
// span config (kSkinnyStreamRagged), 16-byte copies of each k row's aligned-down
// span read back with 16-bit shared loads at the row's misalignment. sm_90
// (clusters).
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

// Past 64 rows the tensor-core work of the m16n8k16 shape (8 tokens per
// instruction, every B fragment re-read per group) stops being small next to
// the stream, and the CTA tile families take over.
inline constexpr int64_t kSkinnyStreamMaxM = 64;

// What the registry races (kernels/skinny/skinny_candidate.cc), from the H200
// runs in bench/results/skinny-h200.md (run 4 for the current kernel):
// - `skinny`, the default config, at M <= 8 with an even N: at or under
//   cuBLAS's time on the large weights with N % 8 == 0, and 16% under it at
//   1 x 30522 x 768 (4-byte copies; 4-8 rows there were 8-11% over, which the
//   race settles per shape).
// - `skinny_wide`, 256-column strips (kSkinnyStreamWide), at 9-16 rows with
//   N % 8 == 0: under cuBLAS's time on the widest weights (16 x 18176 x 4544,
//   16 x 256000 x 3584, 16 x 28672 x 4096), over it on the 4096-wide ones and
//   9216 x 3072, where the race keeps cuBLAS. (At M <= 8 it was within 2% of
//   the default config: not raced twice.)
// From 17 rows on every config was slower than cuBLAS on every weight measured
// (4-60%): not raced there.
// - `skinny_ragged`, the span config (kSkinnyStreamRagged), at 1-16 rows of
//   every N % 8 != 0 (odd N included, where the other configs fall back to
//   element loads): raced against wgmma_ragged, cublas_padded and cuBLAS(Lt)
//   there (run 7 of the results file: its first H200 call).
inline constexpr int64_t kSkinnyStreamRacedMaxM = 8;
inline constexpr int64_t kSkinnyStreamRacedAlignN = 2;
inline constexpr int64_t kSkinnyStreamWideRacedMinM = 9;
inline constexpr int64_t kSkinnyStreamWideRacedMaxM = 16;
inline constexpr int64_t kSkinnyStreamWideRacedAlignN = 8;
// The span config is built for one and two token groups only.
inline constexpr int64_t kSkinnyStreamRaggedMaxM = 16;

// A member: the CTA's column strip, the depth of its ring and how the K splits
// are planned and added. Only the combinations in kSkinnyStreamConfigs are
// built (the first for every dtype and load width, s128x4c4 also for an even
// ragged N in both dtypes, s256x4c2 for both dtypes at N % 8 == 0; the others
// for bf16 with N % 8 == 0, for the bench to race). In a cluster launch with
// more than one token group the ring may run fewer stages than `stages`
// (skinny_stream.cu, RingStages: a cluster's CTAs must all be resident in one
// wave).
struct SkinnyStreamConfig {
  int columns = 128;    // B columns per CTA (256 or 128): a warp per 32 columns
  int stages = 6;       // 32-row stages in the ring (stages - 1 in flight)
  int ctas_per_sm = 2;  // CTAs per SM the split plan fills in one wave
  bool cluster = true;  // <= 8 splits added in a cluster; else (or more) workspace
  const char* name = "s128x6c2";  // for bench tables
  // At N % 8 != 0 (B 16-byte aligned), B by 16-byte copies of each k row's
  // aligned-down span (kSkinnyStreamRagged); else the narrower copies.
  bool spans = false;
};

// The default (first) is s128x6c2: on the H200 (bench/results/skinny-h200.md,
// run 1) it was the fastest config at M <= 8 on every weight of 32 MiB and
// more (0.92-1.05x of cublasGemmEx), and at N = 4096 its K splits (8) meet in a
// cluster in one launch where s256x4c2 needs 16 splits, a workspace and a
// second (reduce) launch. Past 8 rows the 256-column strips (twice the warps
// per SM for the tensor-core work) are faster.
inline constexpr SkinnyStreamConfig kSkinnyStreamConfigs[] = {
    {128, 6, 2, true, "s128x6c2"},  {256, 4, 2, true, "s256x4c2"},
    {256, 4, 2, false, "s256x4w2"}, {256, 6, 1, true, "s256x6c1"},
    {256, 8, 1, true, "s256x8c1"},  {128, 4, 4, true, "s128x4c4"},
    {128, 8, 2, false, "s128x8w2"},
};
inline constexpr SkinnyStreamConfig kSkinnyStreamDefault = kSkinnyStreamConfigs[0];
// The registered wide config, s256x4c2 (built for both dtypes at N % 8 == 0):
// twice the warps per CTA for the tensor-core work of 9-16 rows, 4 stages of
// 16 KiB of B each.
inline constexpr SkinnyStreamConfig kSkinnyStreamWide = kSkinnyStreamConfigs[1];
// The span config: the default's strips, ring and split plan (so the same
// arithmetic and the same bits as the default at every shape), with a ragged N
// moved in whole 16-byte copies. A k row of a strip starts at element kN + n0,
// which is 16-byte aligned only when N % 8 == 0; each row's aligned-down span
// (17 chunks of 16 bytes for 128 columns) lands in shared memory with its
// misalignment d_k = (kN + n0) % 8 kept, and the mma fragments (two k at one
// n per register) are read with 16-bit loads at element n - n0 + d_k, where
// ldmatrix.trans would need 16-byte aligned rows. Bytes past B's row end
// (n >= N) and rows past K land as zeros (cp.async src-size), so nothing is
// read past B's last byte. M <= 16 (kSkinnyStreamRaggedMaxM), B 16-byte
// aligned; at N % 8 == 0 it runs the default's 16-byte path.
inline constexpr SkinnyStreamConfig kSkinnyStreamRagged = {128, 6, 2, true, "s128x6c2s", true};

// How one launch divides K; a function of N, K, the SM count and the config
// only (never of M), so a row of C is computed the same way whatever M is.
struct SkinnyStreamPlan {
  int splits = 1;          // CTAs along K per column strip (grid.y)
  int64_t k_chunk = 0;     // K rows per CTA (a multiple of 32)
  bool workspace = false;  // splits added by a second kernel (else in a cluster)
};
SkinnyStreamPlan MakeSkinnyStreamPlan(int64_t n, int64_t k, int sm_count,
                                      const SkinnyStreamConfig& config);

// Scratch the launch needs: splits * M * N floats when the plan adds the
// splits through workspace, else 0.
size_t SkinnyStreamWorkspaceBytes(const LaunchArgs& args, const SkinnyStreamConfig& config);

// Enqueues the kernel(s) on `stream`. cudaErrorInvalidValue (nothing
// launched) for a dtype other than f16/bf16, M outside [1, 64], N or K outside
// [1, 2^31), null operands, too little workspace, a config not built for
// this dtype and N alignment, or the span config past 16 rows at a ragged N with
// B 16-byte aligned; else the first launch error. Needs sm_90.
cudaError_t LaunchSkinnyStream(const LaunchArgs& args, const SkinnyStreamConfig& config,
                               cudaStream_t stream);

// Why the span config cannot serve these arguments as the registered ragged
// member (nullptr: it can): N % 8 == 0 (the default's path, raced as `skinny`),
// M past kSkinnyStreamRaggedMaxM, B not 16-byte aligned, or what
// LaunchSkinnyStream refuses.
const char* SkinnyStreamRaggedUnsupportedReason(const LaunchArgs& args);

// The default config as a family Launcher, the wide config, and the span
// config (declines what SkinnyStreamRaggedUnsupportedReason names).
extern const Launcher kSkinnyStream;
extern const Launcher kSkinnyStreamWideLauncher;
extern const Launcher kSkinnyStreamRaggedLauncher;

// Accuracy budget (engine/contract.h's formula): f32 accumulation in 16-wide
// tensor-core steps, splits added in f32.
inline constexpr double kSkinnyStreamBudgetAbs = 1e-5;
inline constexpr double kSkinnyStreamBudgetRel = 2e-6;

}  // namespace arbiter::kernels
