// mma_warp: one warp per 16x8 tile of C, mma.sync.aligned.m16n8k16 (sm_80+).
//
// Launch geometry: a block is 4 warps side by side along N, covering a 16 x 32
// strip of C. grid.x walks N in steps of 32 (ceil_div(N, 32)); grid.y walks M
// in steps of 16 (ceil_div(M, 16)). Warp w of block (x, y) owns rows
// [16y, 16y+16) and columns [32x + 8w, 32x + 8w + 8).
//
// Determinism: each warp alone owns its tile and reduces K serially, 16 at a
// time, into the same f32 registers: no atomics, no split-K, no cross-warp
// reduction, so the output is bitwise run-to-run deterministic. An element of C
// depends only on its row of A, its column of B and that fixed K order, never on
// M or on which rows share its tile: batch invariant.
//
// Fragments are loaded straight from global memory, element by element, with
// every load guarded (out-of-range elements read as +0), so any M, N, K works and
// any alignment; stores are guarded too. The simplest correct tensor-core kernel,
// not a fast one.

#include "kernels/mma_warp/mma_warp.h"

#include <cstdint>

#include "kernels/common/mma_sync.cuh"
#include "kernels/common/storage.cuh"

namespace arbiter::kernels {
namespace {

constexpr int kWarps = 4;      // warps per block, side by side along N
constexpr int kTileM = 16;
constexpr int kTileN = 8;
constexpr int kTileK = 16;
constexpr int kBlockN = kWarps * kTileN;

// Two consecutive elements of one A row, packed low-first as the fragment wants.
__device__ __forceinline__ uint32_t LoadPairA(const uint16_t* row, bool row_ok, int col, int k) {
  const uint32_t lo = (row_ok && col < k) ? row[col] : 0u;
  const uint32_t hi = (row_ok && col + 1 < k) ? row[col + 1] : 0u;
  return lo | (hi << 16);
}

// Elements (kk, col) and (kk+1, col) of B, packed low-first.
__device__ __forceinline__ uint32_t LoadPairB(const uint16_t* b, bool col_ok, int64_t col, int kk,
                                              int k, int64_t n) {
  const uint32_t lo = (col_ok && kk < k) ? b[kk * n + col] : 0u;
  const uint32_t hi = (col_ok && kk + 1 < k) ? b[(kk + 1) * n + col] : 0u;
  return lo | (hi << 16);
}

template <bool kBf16>
__global__ void __launch_bounds__(kWarps * 32)
    MmaWarpKernel(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b,
                  uint16_t* __restrict__ c, int m, int n, int k) {
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group = lane / 4;   // fragment row (A, C) or column (B)
  const int thread = lane % 4;  // fragment column pair (A, C) or row pair (B)

  const int row0 = blockIdx.y * kTileM;
  const int col0 = blockIdx.x * kBlockN + warp * kTileN;
  if (col0 >= n) return;  // the whole warp is past N; no block-wide barrier follows

  // The two A rows this lane feeds (fragment rows group and group + 8), clamped
  // so that the row pointers stay inside A even where the row is not loaded.
  const int row_lo = row0 + group;
  const int row_hi = row0 + group + 8;
  const bool lo_ok = row_lo < m;
  const bool hi_ok = row_hi < m;
  const uint16_t* a_lo = a + static_cast<int64_t>(lo_ok ? row_lo : 0) * k;
  const uint16_t* a_hi = a + static_cast<int64_t>(hi_ok ? row_hi : 0) * k;
  const int b_col = col0 + group;  // the B column this lane feeds
  const bool b_ok = b_col < n;

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
  for (int k0 = 0; k0 < k; k0 += kTileK) {
    const int ka = k0 + 2 * thread;  // this lane's first K pair; the second is ka + 8
    uint32_t af[4];
    af[0] = LoadPairA(a_lo, lo_ok, ka, k);
    af[1] = LoadPairA(a_hi, hi_ok, ka, k);
    af[2] = LoadPairA(a_lo, lo_ok, ka + 8, k);
    af[3] = LoadPairA(a_hi, hi_ok, ka + 8, k);
    const uint32_t bf[2] = {LoadPairB(b, b_ok, b_col, ka, k, n),
                            LoadPairB(b, b_ok, b_col, ka + 8, k, n)};
    Mma16816<kBf16>(acc, af, bf);
  }

  // Accumulator layout: acc[0..1] at (group, 2*thread + 0..1), acc[2..3] at group + 8.
  const int col = col0 + 2 * thread;
  if (lo_ok) {
    uint16_t* out = c + static_cast<int64_t>(row_lo) * n;
    if (col < n) out[col] = ToStorage<kBf16>(acc[0]);
    if (col + 1 < n) out[col + 1] = ToStorage<kBf16>(acc[1]);
  }
  if (hi_ok) {
    uint16_t* out = c + static_cast<int64_t>(row_hi) * n;
    if (col < n) out[col] = ToStorage<kBf16>(acc[2]);
    if (col + 1 < n) out[col + 1] = ToStorage<kBf16>(acc[3]);
  }
}

cudaError_t LaunchMmaWarp(const LaunchArgs& args, cudaStream_t stream) {
  if (!DimsInRange(args)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(CeilDiv(args.n, kBlockN)),
                  static_cast<unsigned>(CeilDiv(args.m, kTileM)));
  if (grid.y > 65535) return cudaErrorInvalidValue;
  const dim3 block(kWarps * 32);
  const auto* a = static_cast<const uint16_t*>(args.a);
  const auto* b = static_cast<const uint16_t*>(args.b);
  auto* c = static_cast<uint16_t*>(args.c);
  const int m = static_cast<int>(args.m);
  const int n = static_cast<int>(args.n);
  const int k = static_cast<int>(args.k);
  switch (args.dtype) {
    case DType::kF16:
      MmaWarpKernel<false><<<grid, block, 0, stream>>>(a, b, c, m, n, k);
      break;
    case DType::kBF16:
      MmaWarpKernel<true><<<grid, block, 0, stream>>>(a, b, c, m, n, k);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

const Launcher kMmaWarp = {"LaunchMmaWarp", LaunchMmaWarp};

}  // namespace arbiter::kernels
