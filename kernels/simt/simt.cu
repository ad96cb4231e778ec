// simt: 64 x 64 tiles of C on plain FMA units, K staged through shared memory
// 16 at a time.
//
// Launch geometry: a block is 16 x 16 threads covering a 64 x 64 tile of C.
// grid.x walks N in steps of 64 (ceil_div(N, 64)); grid.y walks M in steps of
// 64 (ceil_div(M, 64)). Thread (tx, ty) owns rows m0 + ty + 16*i and columns
// n0 + tx + 16*j for i, j in 0..3: strided so that a warp's shared-memory reads
// hit 16 different banks (B) or one broadcast word (A).
//
// Determinism: each element is one fma chain over k = 0, 1, ..., K-1 in a single
// thread: no atomics, no split-K, no cross-thread reduction, so the output is
// bitwise run-to-run deterministic, and a row of C depends only on its row of A
// and on B, never on M: batch invariant.

#include "kernels/simt/simt.h"

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace arbiter::kernels {
namespace {

constexpr int kTile = 64;
constexpr int kTileK = 16;
constexpr int kSide = 16;  // threads per block side
constexpr int kPerThread = kTile / kSide;

template <typename T, typename Acc>
__device__ __forceinline__ Acc Widen(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return static_cast<Acc>(v);
  }
}

template <typename T, typename Acc>
__device__ __forceinline__ T Narrow(Acc v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return static_cast<T>(v);
  }
}

__device__ __forceinline__ float Fma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double Fma(double a, double b, double c) { return fma(a, b, c); }

template <typename T, typename Acc>
__global__ void __launch_bounds__(kSide * kSide)
    SimtKernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int m, int n,
               int k) {
  // A is stored k-major (transposed) so the compute loop reads a column of the
  // tile; +1 padding spreads the transposing stores over all banks.
  __shared__ Acc a_tile[kTileK][kTile + 1];
  __shared__ Acc b_tile[kTileK][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * kSide + tx;
  const int m0 = blockIdx.y * kTile;
  const int n0 = blockIdx.x * kTile;

  Acc acc[kPerThread][kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) acc[i][j] = Acc(0);
  }

  for (int k0 = 0; k0 < k; k0 += kTileK) {
    // 64 x 16 of A and 16 x 64 of B, 4 elements of each per thread, +0 outside.
#pragma unroll
    for (int e = 0; e < kTile * kTileK / (kSide * kSide); ++e) {
      const int idx = tid + e * kSide * kSide;
      const int ar = idx / kTileK, ak = idx % kTileK;
      const int gm = m0 + ar, gk = k0 + ak;
      a_tile[ak][ar] = (gm < m && gk < k) ? Widen<T, Acc>(a[static_cast<int64_t>(gm) * k + gk])
                                          : Acc(0);
      const int bk = idx / kTile, bc = idx % kTile;
      const int gkb = k0 + bk, gn = n0 + bc;
      b_tile[bk][bc] = (gkb < k && gn < n) ? Widen<T, Acc>(b[static_cast<int64_t>(gkb) * n + gn])
                                           : Acc(0);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      Acc av[kPerThread], bv[kPerThread];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) av[i] = a_tile[kk][ty + kSide * i];
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) bv[j] = b_tile[kk][tx + kSide * j];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) acc[i][j] = Fma(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int row = m0 + ty + kSide * i;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int col = n0 + tx + kSide * j;
      if (col < n) c[static_cast<int64_t>(row) * n + col] = Narrow<T, Acc>(acc[i][j]);
    }
  }
}

template <typename T, typename Acc>
cudaError_t Launch(const LaunchArgs& args, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(CeilDiv(args.n, kTile)),
                  static_cast<unsigned>(CeilDiv(args.m, kTile)));
  if (grid.y > 65535) return cudaErrorInvalidValue;
  SimtKernel<T, Acc><<<grid, dim3(kSide, kSide), 0, stream>>>(
      static_cast<const T*>(args.a), static_cast<const T*>(args.b), static_cast<T*>(args.c),
      static_cast<int>(args.m), static_cast<int>(args.n), static_cast<int>(args.k));
  return cudaGetLastError();
}

cudaError_t LaunchSimt(const LaunchArgs& args, cudaStream_t stream) {
  if (!DimsInRange(args)) return cudaErrorInvalidValue;
  switch (args.dtype) {
    case DType::kF32:
      return Launch<float, float>(args, stream);
    case DType::kF64:
      return Launch<double, double>(args, stream);
    case DType::kF16:
      return Launch<__half, float>(args, stream);
    case DType::kBF16:
      return Launch<__nv_bfloat16, float>(args, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

const Launcher kSimt = {"LaunchSimt", LaunchSimt};

}  // namespace arbiter::kernels
