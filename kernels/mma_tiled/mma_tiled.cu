// mma_tiled: one CTA per BM x BN tile of C, K walked in BK = 32 slices through a
// 4-stage cp.async shared-memory ring; ldmatrix feeds mma.sync.m16n8k16 (sm_80+).
//
// Launch geometry: grid.x walks N in steps of BN (ceil_div(N, BN)); grid.y walks
// M in steps of BM (ceil_div(M, BM)). CTA (x, y) owns rows [BM*y, BM*y + BM) and
// columns [BN*x, BN*x + BN). Within the CTA, warps form WarpsM x WarpsN with the
// warp index's fast dimension along N. Two tile shapes:
//   large: 128 x 128, 8 warps (2 x 4, 64 x 32 each), when the tiles fill the SMs;
//   small:  64 x 64,  4 warps (2 x 2, 32 x 32 each), otherwise.
// Operands that are not 16-byte loadable as given (K or N not a multiple of 8,
// or unaligned) are first copied into zero-padded scratch by PadColumnsKernel
// (1-D grid-stride, see kernels/common/tile_mainloop.cuh).
//
// Determinism: one CTA owns each C tile and walks K in a fixed order with no
// atomics and no split-K: bitwise run-to-run deterministic. Each element is the
// same chain of 16-wide mma steps from k = 0 whatever the tile shape or load path,
// so a row of C does not depend on M: batch invariant. Padding adds exact zeros.

#include "kernels/mma_tiled/mma_tiled.h"

#include <cstdint>

#include "kernels/common/storage.cuh"
#include "kernels/common/tile_mainloop.cuh"

namespace arbiter::kernels {
namespace {

using LargeTile = mma_tile::TileShape<128, 128, 32, 2, 4, 4>;
using SmallTile = mma_tile::TileShape<64, 64, 32, 2, 2, 4>;

// Two CTAs of the large tile per SM: 2 x 256 threads x 128 registers = 64K.
template <class Shape, bool kBf16>
__global__ void __launch_bounds__(Shape::kThreads, 2)
    MmaTiledKernel(const uint16_t* __restrict__ a, int lda, const uint16_t* __restrict__ b,
                   int ldb, uint16_t* __restrict__ c, int m, int n, int k) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int m0 = blockIdx.y * Shape::kBM;
  const int n0 = blockIdx.x * Shape::kBN;
  float acc[Shape::kFragsM][Shape::kFragsN][4] = {};
  mma_tile::Mainloop<Shape, kBf16>(a, lda, b, ldb, m, n, m0, n0, 0, k,
                                   reinterpret_cast<uint16_t*>(smem_raw), acc);
  // (row*n + col) even and C 4-byte aligned: one 4-byte store per pair.
  const bool pair_aligned = (n % 2) == 0 && reinterpret_cast<uintptr_t>(c) % 4 == 0;
  mma_tile::ForEachAccumulatorPair<Shape>(acc, m0, n0, [&](int row, int col, float v0, float v1) {
    if (row >= m) return;
    uint16_t* out = c + static_cast<int64_t>(row) * n + col;
    if (pair_aligned && col + 1 < n) {
      *reinterpret_cast<uint32_t*>(out) =
          uint32_t{ToStorage<kBf16>(v0)} | (uint32_t{ToStorage<kBf16>(v1)} << 16);
    } else {
      if (col < n) out[0] = ToStorage<kBf16>(v0);
      if (col + 1 < n) out[1] = ToStorage<kBf16>(v1);
    }
  });
}

template <class Shape, bool kBf16>
cudaError_t Launch(const LaunchArgs& args, const mma_tile::Operand& a,
                   const mma_tile::Operand& b, cudaStream_t stream) {
  auto* kernel = &MmaTiledKernel<Shape, kBf16>;
  // Over 48 KB of dynamic shared memory needs an explicit opt-in, once per kernel.
  static const cudaError_t attr = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>(CeilDiv(args.n, Shape::kBN)),
                  static_cast<unsigned>(CeilDiv(args.m, Shape::kBM)));
  if (grid.y > 65535) return cudaErrorInvalidValue;
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(
      a.data, a.ld, b.data, b.ld, static_cast<uint16_t*>(args.c), static_cast<int>(args.m),
      static_cast<int>(args.n), static_cast<int>(args.k));
  return cudaGetLastError();
}

template <bool kBf16>
cudaError_t LaunchDtype(const LaunchArgs& args, cudaStream_t stream) {
  mma_tile::Operand a{static_cast<const uint16_t*>(args.a), static_cast<int>(args.k)};
  mma_tile::Operand b{static_cast<const uint16_t*>(args.b), static_cast<int>(args.n)};
  if (mma_tile::NeedsPadding(args.a, args.b, args.n, args.k)) {
    char* scratch = static_cast<char*>(args.workspace);
    cudaError_t err = mma_tile::PadOperand(args.a, args.m, args.k, scratch, stream, &a);
    if (err != cudaSuccess) return err;
    err = mma_tile::PadOperand(args.b, args.k, args.n,
                               scratch + mma_tile::PaddedBytes(args.m, args.k), stream, &b);
    if (err != cudaSuccess) return err;
  }
  const int64_t large_tiles = CeilDiv(args.m, LargeTile::kBM) * CeilDiv(args.n, LargeTile::kBN);
  return large_tiles >= args.sm_count ? Launch<LargeTile, kBf16>(args, a, b, stream)
                                      : Launch<SmallTile, kBf16>(args, a, b, stream);
}

size_t MmaTiledWorkspaceBytes(const LaunchArgs& args) {
  if (args.m < 1 || args.n < 1 || args.k < 1) return 0;
  if (!mma_tile::NeedsPadding(args.a, args.b, args.n, args.k)) return 0;
  return mma_tile::PaddedBytes(args.m, args.k) + mma_tile::PaddedBytes(args.k, args.n);
}

cudaError_t LaunchMmaTiled(const LaunchArgs& args, cudaStream_t stream) {
  if (!DimsInRange(args)) return cudaErrorInvalidValue;
  const size_t need = MmaTiledWorkspaceBytes(args);
  if (need > 0 && (args.workspace == nullptr || args.workspace_bytes < need ||
                   !mma_tile::Aligned16(args.workspace))) {
    return cudaErrorInvalidValue;
  }
  switch (args.dtype) {
    case DType::kF16:
      return LaunchDtype<false>(args, stream);
    case DType::kBF16:
      return LaunchDtype<true>(args, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

const Launcher kMmaTiled = {"LaunchMmaTiled", LaunchMmaTiled, MmaTiledWorkspaceBytes};

}  // namespace arbiter::kernels
