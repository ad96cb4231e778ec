// splitk: the mma_tiled main loop (kernels/common/tile_mainloop.cuh) run over
// one K slice per CTA, then a reduction (kernels/common/split_reduce.h).
//
// Launch geometry of the partial kernel: grid.x walks N in steps of the tile
// (ceil_div(N, T)), grid.y walks M (ceil_div(M, T)), grid.z walks the K splits
// (split z covers K [z * k_chunk, min(K, (z + 1) * k_chunk))). T is 64 (4 warps,
// 32 x 32 each) when M and N are both at least 64, else 32 (4 warps, 16 x 16).
// The reduce / convert kernels are 1-D: grid.x walks the M*N elements of C in
// row-major order (split_reduce.h). Operands that are not
// 16-byte loadable as given are first copied into zero-padded scratch
// (PadColumnsKernel, tile_mainloop.cuh), which changes no bits.
//
// Determinism: splitk writes split z's partial tile to its own scratch slab
// [z][M][N] (no atomics) and the reduce kernel sums slabs 0, 1, 2, ... in that
// fixed order, so the output is bitwise run-to-run deterministic on one device.
// The split count follows M, N and the SM count, so a row of C can change with
// M: not batch invariant. splitk_atomic adds the splits with f32 atomicAdd into
// one matrix in whatever order the CTAs finish: nondeterministic.

#include "kernels/splitk/splitk.h"

#include <algorithm>
#include <cstdint>

#include "kernels/common/split_reduce.h"
#include "kernels/common/tile_mainloop.cuh"

namespace arbiter::kernels {
namespace {

using Tile32 = mma_tile::TileShape<32, 32, 32, 2, 2, 4>;
using Tile64 = mma_tile::TileShape<64, 64, 32, 2, 2, 4>;

constexpr int kMinSplitK = 256;      // K per split: 8 k-tiles, so the 4-stage ring fills
constexpr int kCtasPerSm = 4;        // 128-thread CTAs wanted per SM

struct Plan {
  int tile = 32;     // square CTA tile: 32 or 64
  int splits = 1;
  int k_chunk = 0;   // multiple of 32 (BK): cp.async chunks never straddle a split
};

Plan MakePlan(const LaunchArgs& args) {
  Plan plan;
  plan.tile = std::min(args.m, args.n) >= 64 ? 64 : 32;
  const int64_t tiles = CeilDiv(args.m, plan.tile) * CeilDiv(args.n, plan.tile);
  const int64_t wanted = CeilDiv(int64_t{kCtasPerSm} * std::max(args.sm_count, 1), tiles);
  const int64_t most = std::max<int64_t>(1, args.k / kMinSplitK);
  const int64_t splits = std::clamp<int64_t>(wanted, 1, std::min<int64_t>(most, 65535));
  plan.k_chunk = static_cast<int>(CeilDiv(CeilDiv(args.k, splits), 32) * 32);
  plan.splits = static_cast<int>(CeilDiv(args.k, plan.k_chunk));
  return plan;
}

// Partial slabs (splits of them, or one for the atomic variant), 256-byte multiple.
size_t PartialBytes(const LaunchArgs& args, bool atomic, const Plan& plan) {
  const size_t slabs = atomic ? 1 : static_cast<size_t>(plan.splits);
  const size_t bytes =
      slabs * static_cast<size_t>(args.m) * static_cast<size_t>(args.n) * sizeof(float);
  return (bytes + 255) / 256 * 256;
}

template <class Shape, bool kBf16, bool kAtomic>
__global__ void __launch_bounds__(Shape::kThreads)
    SplitKPartialKernel(const uint16_t* __restrict__ a, int lda, const uint16_t* __restrict__ b,
                        int ldb, float* __restrict__ partials, int m, int n, int k, int k_chunk) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int m0 = blockIdx.y * Shape::kBM;
  const int n0 = blockIdx.x * Shape::kBN;
  const int k_begin = blockIdx.z * k_chunk;
  const int k_end = min(k, k_begin + k_chunk);
  float acc[Shape::kFragsM][Shape::kFragsN][4] = {};
  mma_tile::Mainloop<Shape, kBf16>(a, lda, b, ldb, m, n, m0, n0, k_begin, k_end,
                                   reinterpret_cast<uint16_t*>(smem_raw), acc);
  float* slab = kAtomic ? partials : partials + static_cast<int64_t>(blockIdx.z) * m * n;
  mma_tile::ForEachAccumulatorPair<Shape>(acc, m0, n0, [&](int row, int col, float v0, float v1) {
    if (row >= m) return;
    float* out = slab + static_cast<int64_t>(row) * n + col;
    if constexpr (kAtomic) {
      if (col < n) atomicAdd(out, v0);
      if (col + 1 < n) atomicAdd(out + 1, v1);
    } else {
      if (col < n) out[0] = v0;
      if (col + 1 < n) out[1] = v1;
    }
  });
}

template <class Shape, bool kBf16, bool kAtomic>
cudaError_t LaunchPartial(const LaunchArgs& args, const Plan& plan, const mma_tile::Operand& a,
                          const mma_tile::Operand& b, float* partials, cudaStream_t stream) {
  auto* kernel = &SplitKPartialKernel<Shape, kBf16, kAtomic>;
  static const cudaError_t attr = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>(CeilDiv(args.n, Shape::kBN)),
                  static_cast<unsigned>(CeilDiv(args.m, Shape::kBM)),
                  static_cast<unsigned>(plan.splits));
  if (grid.y > 65535 || grid.z > 65535) return cudaErrorInvalidValue;
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(
      a.data, a.ld, b.data, b.ld, partials, static_cast<int>(args.m), static_cast<int>(args.n),
      static_cast<int>(args.k), plan.k_chunk);
  return cudaGetLastError();
}

template <bool kBf16, bool kAtomic>
cudaError_t LaunchVariant(const LaunchArgs& args, const Plan& plan, cudaStream_t stream) {
  auto* partials = static_cast<float*>(args.workspace);
  const int64_t mn = args.m * args.n;
  if constexpr (kAtomic) {
    const cudaError_t err = cudaMemsetAsync(partials, 0, mn * sizeof(float), stream);
    if (err != cudaSuccess) return err;
  }
  mma_tile::Operand a{static_cast<const uint16_t*>(args.a), static_cast<int>(args.k)};
  mma_tile::Operand b{static_cast<const uint16_t*>(args.b), static_cast<int>(args.n)};
  if (mma_tile::NeedsPadding(args.a, args.b, args.n, args.k)) {
    char* scratch = static_cast<char*>(args.workspace) + PartialBytes(args, kAtomic, plan);
    cudaError_t err = mma_tile::PadOperand(args.a, args.m, args.k, scratch, stream, &a);
    if (err != cudaSuccess) return err;
    err = mma_tile::PadOperand(args.b, args.k, args.n,
                               scratch + mma_tile::PaddedBytes(args.m, args.k), stream, &b);
    if (err != cudaSuccess) return err;
  }
  const cudaError_t err =
      plan.tile == 64 ? LaunchPartial<Tile64, kBf16, kAtomic>(args, plan, a, b, partials, stream)
                      : LaunchPartial<Tile32, kBf16, kAtomic>(args, plan, a, b, partials, stream);
  if (err != cudaSuccess) return err;
  // The reduction order depends on the plan alone. The atomic variant converts
  // its one slab: a reduction over a single split.
  return LaunchSplitReduce(args.dtype, partials, mn, kAtomic ? 1 : plan.splits, args.c, stream);
}

size_t WorkspaceBytes(const LaunchArgs& args, bool atomic) {
  if (args.m < 1 || args.n < 1 || args.k < 1) return 0;
  size_t bytes = PartialBytes(args, atomic, MakePlan(args));
  if (mma_tile::NeedsPadding(args.a, args.b, args.n, args.k)) {
    bytes += mma_tile::PaddedBytes(args.m, args.k) + mma_tile::PaddedBytes(args.k, args.n);
  }
  return bytes;
}

cudaError_t Launch(const LaunchArgs& args, bool atomic, cudaStream_t stream) {
  if (!DimsInRange(args)) return cudaErrorInvalidValue;
  if (args.workspace == nullptr || args.workspace_bytes < WorkspaceBytes(args, atomic) ||
      !mma_tile::Aligned16(args.workspace)) {
    return cudaErrorInvalidValue;
  }
  const Plan plan = MakePlan(args);
  switch (args.dtype) {
    case DType::kF16:
      return atomic ? LaunchVariant<false, true>(args, plan, stream)
                    : LaunchVariant<false, false>(args, plan, stream);
    case DType::kBF16:
      return atomic ? LaunchVariant<true, true>(args, plan, stream)
                    : LaunchVariant<true, false>(args, plan, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

size_t SplitKWorkspaceBytes(const LaunchArgs& args) { return WorkspaceBytes(args, false); }
size_t SplitKAtomicWorkspaceBytes(const LaunchArgs& args) { return WorkspaceBytes(args, true); }

cudaError_t LaunchSplitK(const LaunchArgs& args, cudaStream_t stream) {
  return Launch(args, false, stream);
}
cudaError_t LaunchSplitKAtomic(const LaunchArgs& args, cudaStream_t stream) {
  return Launch(args, true, stream);
}

}  // namespace

const Launcher kSplitK = {"LaunchSplitK", LaunchSplitK, SplitKWorkspaceBytes};
const Launcher kSplitKAtomic = {"LaunchSplitKAtomic", LaunchSplitKAtomic,
                                SplitKAtomicWorkspaceBytes};

}  // namespace arbiter::kernels
