// mid_stream: C[M, N] = A[M, K] B[K, N] for 17-128 rows of A against a wide
// weight B (transformer prefill chunks and batched decode), where the work is
// bound by streaming B once from DRAM: 64 x 8192 x 8192 bf16 moves 128 MiB for
// 8.6 GFLOP, a few microseconds of tensor-core time. So, like skinny_stream
// (M <= 16), the kernel is built around the stream of B, computing C^T = B^T A^T
// on mma.sync m16n8k16 (16 weight columns x 8 tokens per instruction, every B
// element loaded from shared memory once per CTA), but with one CTA per SM and
// the work divided stream-K: the (column strip, 32-row k stage) units of B are
// numbered strip by strip and each CTA takes one contiguous, equal run of them,
// so every SM streams the same bytes whatever N and K are, in one launch.
//
// Launch geometry: grid.x = ctas = min(SMs x CTAs an SM holds, units), one
// 1-D axis; CTA c takes units [c U / ctas, (c + 1) U / ctas) of the U =
// strips x ceil(K / 32) units, unit u = strip u / ceil(K / 32) (columns
// [256 s, 256 s + 256) of C), k rows 32 (u % ceil(K / 32)) ... + 31. No axis
// walks M: every CTA carries all M rows (zero-filled to 8-token groups). Where
// a CTA's run covers a whole strip it writes that strip of C; where a strip is
// shared, each CTA writes its f32 partial to its own workspace slot and the
// last to arrive (a per-strip counter) adds every slot in CTA order and writes
// C. See mid_stream.cu for the copies, the ring and the fragments.
//
// Determinism: each accumulator walks its CTA's k rows upwards, and a strip's
// partials are added in CTA order whoever arrives last: bitwise run to run.
// The unit split depends on N, K, the SM count and the CTAs an SM holds, never
// on M, and a token's mma chain does not depend on the other tokens: a row of C
// is the same at every M the family takes (batch invariant), as long as the
// same config runs.
//
// Needs: f16 or bf16, N % 8 == 0, K % 8 == 0 and A, B 16-byte aligned (every
// copy is 16 bytes), 1 <= M <= 128 (the registration races 17-128), M x N < 2^31. sm_90 for
// the figures that picked the geometry; the code is sm_80 mma.sync.
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

inline constexpr int64_t kMidStreamMaxM = 128;
// The rows the candidate covers (mid_stream_candidate.cc): below 17 the skinny
// family streams B. Not registered: correct on the H200, but 1.3-3.6x slower
// than cuBLAS at every shape measured, at 36% of DRAM peak: one CTA of 8-16
// warps an SM behind a CTA-wide barrier per 16 KiB unit took ~1.25 us a unit
// whatever M (bench/results/mid-stream-h200.md says what to try next).
inline constexpr int64_t kMidStreamRacedMinM = 17;
inline constexpr int64_t kMidStreamRacedMaxM = 128;

// A member: the CTA's column strip and how its warps share the tokens.
// A warp owns 32 columns of the strip; with token_split 2 two warps share
// those columns, each computing half of the token groups (twice the warps an
// SM to hide ldmatrix and mma latency, half the accumulators a thread).
struct MidStreamConfig {
  int columns = 256;     // B columns per strip (256 or 512)
  int token_split = 1;   // warps per 32 columns (1 or 2), each with 1/split of the tokens
  const char* name = "c256t1";  // for bench tables
};
inline constexpr MidStreamConfig kMidStreamConfigs[] = {
    {256, 1, "c256t1"},
    {256, 2, "c256t2"},
    {512, 1, "c512t1"},  // M <= 64 only: 16 warps with 64 accumulators each
};
inline constexpr MidStreamConfig kMidStreamDefault = kMidStreamConfigs[1];

// How one launch divides B (a function of N, K, the SM count and the config's
// CTAs per SM; never of M).
struct MidStreamPlan {
  int ctas = 0;             // grid.x
  int strips = 0;           // ceil(N / columns)
  int units_per_strip = 0;  // ceil(K / 32)
  int64_t units = 0;        // strips x units_per_strip
};
MidStreamPlan MakeMidStreamPlan(int64_t n, int64_t k, int sm_count, int ctas_per_sm,
                                int columns);

// nullptr when `config` takes these arguments; else why not.
const char* MidStreamUnsupportedReason(const LaunchArgs& args, const MidStreamConfig& config);

// Scratch the launch needs: 2 slots of M x columns floats per CTA (0 when the
// arguments are unsupported).
size_t MidStreamWorkspaceBytes(const LaunchArgs& args, const MidStreamConfig& config);

// Enqueues the kernel on `stream` (one launch). cudaErrorInvalidValue (nothing
// launched) for what MidStreamUnsupportedReason rejects or too little
// workspace; else the launch's error. Uses a per-stream array of arrival
// counters that every launch leaves at zero.
cudaError_t LaunchMidStream(const LaunchArgs& args, const MidStreamConfig& config,
                            cudaStream_t stream);

// The default config as a family Launcher (declines what it does not take).
extern const Launcher kMidStream;

// Accuracy budget (engine/contract.h's formula): f32 accumulation in 16-wide
// tensor-core steps, a strip's partials added in f32.
inline constexpr double kMidStreamBudgetAbs = 1e-5;
inline constexpr double kMidStreamBudgetRel = 2e-6;

}  // namespace arbiter::kernels
