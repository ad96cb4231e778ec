// wgmma_ragged: C[M,N] = A[M,K] B[K,N] (row-major, f16 or bf16, f32
// accumulation) on Hopper (sm_90a) for an N that is not a multiple of 8 (a
// vocabulary such as 30522 or 32001), with no padded copies of B or C.
//
// Why not TMA for B: B's rows are 2N bytes apart, not a multiple of 16, so no
// tensor map describes B, and a TMA box whose inner start is not 16-byte
// aligned is an illegal instruction on the H200 (bench/results/wgmma-ragged-h200.md).
// 4-byte cp.async copies of B were correct but too slow (186 us at
// 512x30522x768: too few bytes in flight). Here every byte of B still moves in
// aligned 16-byte loads: k-row k of a B tile starts at byte 2(kN + n0), whose
// misalignment s_k = 2(kN + n0) mod 16 is the same all along that row. A
// producer warp reads the aligned-down span of a row (33 16-byte chunks for a
// 256-column tile; lane i chunk i, the 33rd by cp.async into a small shared
// slot), takes its right neighbour's chunk with __shfl_down_sync, shifts the
// pair left by s_k bytes (word selects and a funnel shift), zeroes columns >=
// N and rows >= K, and stores the 16 bytes into the 128B-swizzled stage
// layout wgmma reads as an MN-major B operand. A still comes by TMA (K % 8 == 0: 16-byte row stride).
// C is stored straight from the accumulators with bounds checks, 4 bytes per
// column pair when N is even, 2 bytes per element when N is odd (C's rows are
// not 16-byte aligned either).
//
// How it runs: one 128 x 256 tile of C per CTA at a time; 384 threads = one
// producer warpgroup (thread 0 issues A's TMA loads, its 4 warps realign B)
// and two consumer warpgroups (64 rows each, wgmma m64n256k16, f32
// accumulators), over a ring of 4 stages of 64-deep k-blocks completing on
// mbarriers (A's TMA bytes plus one arrival per producer warp).
//
// Launch geometry: a persistent 1-D grid, grid.x = min(tiles, sm_count). CTA b
// computes tiles b, b + grid.x, ...; tile t -> (m tile, n tile) by
// WgmmaRaggedTileAt: consecutive indices walk down M inside a group of
// kWgmmaRaggedGroupM tile rows, then across N, so the CTAs in flight share B
// columns in L2. Rows of C m_tile * 128 ..., columns n_tile * 256 ....
//
// Determinism: one CTA owns each C tile and walks K in a fixed order with no
// atomics: bitwise run to run. The tile shape never depends on M and rows past
// M are zero-filled by TMA and never stored, so a row of C does not depend on
// M either: batch invariant.
//
// Loads in flight: each producer thread keeps one chunk of each of its warp's
// 16 rows of the next k-block in flight (64 registers; setmaxnreg 120 / 192),
// issuing row j's next load in the source as soon as row j is realigned.
// Measured on the H200 (bench/results/wgmma-ragged-h200.md, run 3): 127 us at
// 512x30522x768 f16 (cublas_padded 88 us), 30.4 us at 8x30522x768 (cuBLASLt
// 28.3), 123 us at 8x32001x4096 bf16 (cuBLAS 208 us: 1.69x). ptxas issues the
// next stage's loads after the realign, not between its rows, so one round
// trip per stage is still exposed; the results page says what to try next.
//
// Needs: sm_90a; N % 8 != 0 (N % 8 == 0 goes to the TMA families); K % 8 == 0;
// A and B 16-byte aligned, C 4-byte aligned (2-byte when N is odd).
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/common/launch_args.h"

#if defined(__CUDACC__)
#define WGMMA_RAGGED_HOST_DEVICE __host__ __device__
#else
#define WGMMA_RAGGED_HOST_DEVICE
#endif

namespace arbiter::kernels {

inline constexpr int kWgmmaRaggedTileM = 128;
inline constexpr int kWgmmaRaggedTileN = 256;
// ~sqrt(132 SMs * 2) tile rows walked together: the CTAs in flight share B.
inline constexpr int kWgmmaRaggedGroupM = 16;

// f32 accumulation in a fixed order: the error grows like sqrt(K)
// (engine/contract.h's budget form), as for the wgmma family.
inline constexpr double kWgmmaRaggedBudgetAbs = 1e-6;
inline constexpr double kWgmmaRaggedBudgetRel = 1e-5;

// Where one launch puts its work (see the file comment).
struct WgmmaRaggedPlan {
  int tiles_m = 0;  // ceil(M / 128)
  int tiles_n = 0;  // ceil(N / 256)
  int grid_x = 0;   // CTAs: min(tiles, sm_count)
  int tiles() const { return tiles_m * tiles_n; }
};

WgmmaRaggedPlan MakeWgmmaRaggedPlan(int64_t m, int64_t n, int sm_count);

// Tile `index` (0 <= index < tiles) -> (m tile, n tile). Shared by the kernel.
WGMMA_RAGGED_HOST_DEVICE inline void WgmmaRaggedTileAt(int index, int tiles_m, int tiles_n,
                                                       int* m_tile, int* n_tile) {
  const int per_group = kWgmmaRaggedGroupM * tiles_n;
  const int group = index / per_group;
  const int first_m = group * kWgmmaRaggedGroupM;
  const int rows = (tiles_m - first_m) < kWgmmaRaggedGroupM ? (tiles_m - first_m) : kWgmmaRaggedGroupM;
  const int r = index - group * per_group;
  *m_tile = first_m + r % rows;
  *n_tile = r / rows;
}

// nullptr when the kernel takes these arguments; else why not.
const char* WgmmaRaggedUnsupportedReason(const LaunchArgs& args);

// Enqueues the kernel. cudaErrorInvalidValue (nothing launched) for arguments
// WgmmaRaggedUnsupportedReason rejects; else the launch's error.
cudaError_t LaunchWgmmaRagged(const LaunchArgs& args, cudaStream_t stream);

// The family's entry point (no workspace; declines what
// WgmmaRaggedUnsupportedReason rejects).
extern const Launcher kWgmmaRagged;

}  // namespace arbiter::kernels
