// wgmma_bt: C[M,N] = A[M,K] B[K,N] (row-major, f16 or bf16, f32 accumulation)
// for a few rows of A (17-256 tokens) against a wide weight, computed as
// C^T = B^T A^T on Hopper (sm_90a) so that the wide side is wgmma's 64-row M
// operand and the tokens are its N (32, 64, 128 or 256).
//
// Why transposed: with M <= 256 a normal 64- or 128-row tile wastes the
// tensor cores' M side (17 rows of 64) and leaves few tiles to spread over 132
// SMs. Here a CTA owns a strip of 64 x consumers columns of C for a tile of
// tokens: B's [64 k x 64 n] boxes are read by TMA straight from the row-major
// weight (N is contiguous: an MN-major A operand, allowed for 16-bit types)
// and A's [tokens x 64 k] box is the K-major B operand. B is streamed from
// DRAM once; the token tile is re-read from L2 by every strip.
//
// Launch geometry: grid.x = strips x splits (strip = blockIdx.x / splits,
// split rank = blockIdx.x % splits), grid.y = token tiles (rows of C
// blockIdx.y * tokens ...). With splits > 1 the CTAs of a strip form a
// thread-block cluster along x (splits <= 8), each walking its range of 64-deep
// k-blocks; the partials meet in distributed shared memory and are added in
// rank order. A CTA has `consumers` warpgroups (warps 0..4c-1, one per 64
// weight columns) and one producer warp (the last) that issues the TMA loads
// into a ring of stages.
//
// Determinism: one cluster per C tile, K walked in a fixed order per rank and
// ranks added in a fixed order, no atomics: bitwise run to run. The token tile
// and the split count follow M (and N, K, the SM count), so rows of C may
// differ in the last bit between different M: not batch invariant.
//
// Needs: K % 8 == 0 and N % 8 == 0 (TMA wants 16-byte row strides), A, B and C
// 16-byte aligned; any M (token tiles past 256 rows go along grid.y).
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

// The token range the candidate covers (wgmma_bt_candidate.h): below 17 rows
// the skinny family streams B at the bandwidth floor; past 256 the 128-row
// wgmma tiles fill the SMs on their own. Not registered yet: correct on the
// H200, but slower than what is served there at every shape measured
// (bench/results/wgmma-bt-h200.md).
inline constexpr int64_t kWgmmaBtRacedMinM = 17;
inline constexpr int64_t kWgmmaBtRacedMaxM = 256;

// f32 accumulation in a fixed order, the split partials added in f32: the
// error grows like sqrt(K) (engine/contract.h's budget form).
inline constexpr double kWgmmaBtBudgetAbs = 1e-6;
inline constexpr double kWgmmaBtBudgetRel = 1e-5;

// Where one launch puts its work (see the file comment).
struct WgmmaBtPlan {
  int tokens = 0;       // token tile: wgmma's N (32, 64, 128 or 256)
  int consumers = 0;    // warpgroups per CTA, 64 weight columns each
  int stages = 0;       // ring depth
  int ctas_per_sm = 0;  // what the shared memory allows
  int strips = 0;       // ceil(N / (64 * consumers))
  int token_tiles = 0;  // ceil(M / tokens): grid.y
  int splits = 1;       // CTAs (a cluster) per strip along K
  int kb_per_split = 0; // 64-deep k-blocks per rank
  int64_t grid_x() const { return int64_t{strips} * splits; }
};

// The plan for these dimensions on `sm_count` SMs. force_splits > 0 asks for
// that many splits (clamped to 1..8 and to the k-blocks; for tests and the
// bench); 0 picks the count whose waves of CTAs finish soonest.
WgmmaBtPlan MakeWgmmaBtPlan(int64_t m, int64_t n, int64_t k, int sm_count, int force_splits = 0);

// nullptr when the kernel takes these arguments; else why not.
const char* WgmmaBtUnsupportedReason(const LaunchArgs& args);

// Enqueues the kernel. cudaErrorInvalidValue (nothing launched) for arguments
// WgmmaBtUnsupportedReason rejects; else the launch's error.
cudaError_t LaunchWgmmaBt(const LaunchArgs& args, cudaStream_t stream, int force_splits = 0);

// The family's entry point: LaunchWgmmaBt with the planned split count, no
// workspace; it declines what WgmmaBtUnsupportedReason rejects.
extern const Launcher kWgmmaBt;

}  // namespace arbiter::kernels
