// gemv: C[M, N] = A[M, K] B[K, N] for M <= 16, bound by streaming B once.
//
// Launch geometry: a block is 256 threads = 4 column groups x 64 K groups.
// grid.x walks N in steps of 32 columns (ceil_div(N, 32)); grid.y walks K
// splits (split y takes the 8-row K chunks [y * per_split, (y+1) * per_split));
// no grid axis walks M: every block computes all M rows of its 32 columns. Thread
// t has column group t % 4 (8 adjacent columns: one 16-byte load of a B row) and
// K group t / 4, which takes its split's chunks kgroup, kgroup + 64, ... A warp
// therefore reads 8 B rows x 64 contiguous bytes per load instruction. With
// more than one split, each block writes f32 partials to scratch [y][M][N] and a
// 1-D reduce kernel (kernels/common/split_reduce.h) adds them in split order.
// Splits are used when N alone gives too few blocks to keep the SMs streaming
// (see MakePlan).
//
// Determinism: each thread accumulates its chunks in a fixed order with fmaf; the
// 8 K groups of a warp are combined by a fixed xor-shuffle tree, the 8 warps in
// warp order through shared memory, and the splits in split order. No atomics:
// bitwise run-to-run deterministic. The split count depends on N, K and the SM
// count, never on M, and a row's chain of operations is the same whatever M (M
// only sets how many rows are carried): batch invariant within M <= 16.

#include "kernels/gemv/gemv.h"

#include <algorithm>
#include <cstdint>

#include <cuda_fp16.h>

#include "kernels/common/split_reduce.h"
#include "kernels/common/storage.cuh"

namespace arbiter::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kColGroups = 4;                       // 8 columns each
constexpr int kKGroups = kThreads / kColGroups;     // 64
constexpr int kBlockN = kColGroups * 8;             // 32 columns per block
constexpr int kWarps = kThreads / 32;

template <bool kBf16>
__device__ __forceinline__ float Lo(uint32_t w) {
  if constexpr (kBf16) {
    return __uint_as_float(w << 16);
  } else {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
  }
}
template <bool kBf16>
__device__ __forceinline__ float Hi(uint32_t w) {
  if constexpr (kBf16) {
    return __uint_as_float(w & 0xffff0000u);
  } else {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
  }
}

// Eight consecutive elements of a row from `col`, as 16-bit words packed
// low-first; guarded element by element (+0 outside) unless kVector.
template <bool kVector>
__device__ __forceinline__ uint4 LoadEight(const uint16_t* row, bool row_ok, int col, int limit) {
  if constexpr (kVector) {
    // kVector: limit % 8 == 0, so the chunk is wholly inside or outside.
    if (!row_ok || col >= limit) return make_uint4(0, 0, 0, 0);
    return __ldg(reinterpret_cast<const uint4*>(row + col));
  } else {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = col + 2 * i;
      const uint32_t lo = (row_ok && c < limit) ? row[c] : 0u;
      const uint32_t hi = (row_ok && c + 1 < limit) ? row[c + 1] : 0u;
      w[i] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

__device__ __forceinline__ uint32_t Word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// kRows: rows of C carried (a power of two >= M). kVector: 16-byte loads.
// The explicit minimum of one block per SM keeps ptxas from capping registers
// at 64 (it spilled the f16 one-row element-load variant otherwise).
// `partials` null: write C; else write split blockIdx.y's f32 slab.
template <bool kBf16, int kRows, bool kVector>
__global__ void __launch_bounds__(kThreads, 1)
    GemvKernel(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b,
               uint16_t* __restrict__ c, float* __restrict__ partials, int m, int n, int k,
               int chunks_per_split) {
  const int col_group = threadIdx.x % kColGroups;
  const int k_group = threadIdx.x / kColGroups;
  const int col0 = blockIdx.x * kBlockN + col_group * 8;

  float acc[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[r][j] = 0.f;
  }

  const int chunk_begin = blockIdx.y * chunks_per_split;
  const int chunk_end = min((k + 7) / 8, chunk_begin + chunks_per_split);
  // Small row counts leave registers for a second chunk's 8 loads in flight.
  constexpr int kUnroll = (kVector && kRows <= 2) ? 2 : 1;
#pragma unroll kUnroll
  for (int chunk = chunk_begin + k_group; chunk < chunk_end; chunk += kKGroups) {
    const int k0 = chunk * 8;
    // Eight B rows first: 8 independent 16-byte loads in flight per thread.
    uint4 brow[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int kk = k0 + i;
      const bool ok = kk < k;
      brow[i] = LoadEight<kVector>(b + static_cast<int64_t>(ok ? kk : 0) * n, ok, col0, n);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= m) break;  // uniform across the block
      const uint4 arow = LoadEight<kVector>(a + static_cast<int64_t>(r) * k, true, k0, k);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t aw = Word(arow, i / 2);
        const float av = (i % 2 == 0) ? Lo<kBf16>(aw) : Hi<kBf16>(aw);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const uint32_t bw = Word(brow[i], j / 2);
          const float bv = (j % 2 == 0) ? Lo<kBf16>(bw) : Hi<kBf16>(bw);
          acc[r][j] = fmaf(av, bv, acc[r][j]);
        }
      }
    }
  }

  // The 8 K groups of a warp (lane bits 2..4) by a fixed butterfly, then the 8
  // warps in warp order.
  __shared__ float partial[kWarps][kColGroups][kRows][8];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float v = acc[r][j];
      v += __shfl_xor_sync(0xffffffffu, v, 4);
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      if (lane < kColGroups) partial[warp][col_group][r][j] = v;
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kRows * kBlockN; idx += kThreads) {
    const int r = idx / kBlockN;
    const int col = idx % kBlockN;
    const int gcol = blockIdx.x * kBlockN + col;
    if (r >= m || gcol >= n) continue;
    float sum = partial[0][col / 8][r][col % 8];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) sum += partial[w][col / 8][r][col % 8];
    if (partials == nullptr) {
      c[static_cast<int64_t>(r) * n + gcol] = ToStorage<kBf16>(sum);
    } else {
      partials[(static_cast<int64_t>(blockIdx.y) * m + r) * n + gcol] = sum;
    }
  }
}

constexpr int kBlocksPerSm = 4;  // blocks wanted per SM to keep enough loads in flight

struct Plan {
  int splits = 1;
  int chunks_per_split = 0;  // 8-row K chunks per split
};

// Depends on N, K and the SM count only (never on M): batch invariance.
// K is split only when N gives fewer column blocks than half the SMs: measured
// on the H200, a 5-way split at 1x4096x4096 (128 column blocks) took 23 us
// against 19 us unsplit (the reduce launch costs more than the extra blocks
// gain), while at 16x16x65536 (one column block) it took 943 us down to 22 us.
Plan MakePlan(const LaunchArgs& args) {
  const int64_t chunks = CeilDiv(args.k, 8);
  const int64_t column_blocks = CeilDiv(args.n, kBlockN);
  const int64_t sms = std::max(args.sm_count, 1);
  if (2 * column_blocks >= sms) return Plan{1, static_cast<int>(chunks)};
  const int64_t wanted = CeilDiv(int64_t{kBlocksPerSm} * sms, column_blocks);
  // Every K group gets at least one chunk per split.
  const int64_t most = std::max<int64_t>(1, chunks / kKGroups);
  const int64_t splits = std::clamp<int64_t>(wanted, 1, std::min<int64_t>(most, 65535));
  Plan plan;
  plan.chunks_per_split = static_cast<int>(CeilDiv(chunks, splits));
  plan.splits = static_cast<int>(CeilDiv(chunks, plan.chunks_per_split));
  return plan;
}

template <bool kBf16, int kRows>
cudaError_t LaunchRows(const LaunchArgs& args, const Plan& plan, cudaStream_t stream) {
  const bool vector = args.k % 8 == 0 && args.n % 8 == 0 &&
                      reinterpret_cast<uintptr_t>(args.a) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(args.b) % 16 == 0;
  const dim3 grid(static_cast<unsigned>(CeilDiv(args.n, kBlockN)),
                  static_cast<unsigned>(plan.splits));
  const auto* a = static_cast<const uint16_t*>(args.a);
  const auto* b = static_cast<const uint16_t*>(args.b);
  auto* c = static_cast<uint16_t*>(args.c);
  float* partials = plan.splits > 1 ? static_cast<float*>(args.workspace) : nullptr;
  const int m = static_cast<int>(args.m);
  const int n = static_cast<int>(args.n);
  const int k = static_cast<int>(args.k);
  if (vector) {
    GemvKernel<kBf16, kRows, true>
        <<<grid, kThreads, 0, stream>>>(a, b, c, partials, m, n, k, plan.chunks_per_split);
  } else {
    GemvKernel<kBf16, kRows, false>
        <<<grid, kThreads, 0, stream>>>(a, b, c, partials, m, n, k, plan.chunks_per_split);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || partials == nullptr) return err;
  // The reduction order depends on the split count alone (never on M).
  return LaunchSplitReduce(args.dtype, partials, args.m * args.n, plan.splits, c, stream);
}

template <bool kBf16>
cudaError_t LaunchDtype(const LaunchArgs& args, const Plan& plan, cudaStream_t stream) {
  if (args.m <= 1) return LaunchRows<kBf16, 1>(args, plan, stream);
  if (args.m <= 2) return LaunchRows<kBf16, 2>(args, plan, stream);
  if (args.m <= 4) return LaunchRows<kBf16, 4>(args, plan, stream);
  if (args.m <= 8) return LaunchRows<kBf16, 8>(args, plan, stream);
  return LaunchRows<kBf16, 16>(args, plan, stream);
}

size_t GemvWorkspaceBytes(const LaunchArgs& args) {
  if (args.m < 1 || args.n < 1 || args.k < 1) return 0;
  const Plan plan = MakePlan(args);
  if (plan.splits == 1) return 0;
  return static_cast<size_t>(plan.splits) * static_cast<size_t>(args.m) *
         static_cast<size_t>(args.n) * sizeof(float);
}

cudaError_t LaunchGemv(const LaunchArgs& args, cudaStream_t stream) {
  if (!DimsInRange(args) || args.m > kGemvMaxM) return cudaErrorInvalidValue;
  const Plan plan = MakePlan(args);
  if (plan.splits > 1 &&
      (args.workspace == nullptr || args.workspace_bytes < GemvWorkspaceBytes(args))) {
    return cudaErrorInvalidValue;
  }
  switch (args.dtype) {
    case DType::kF16:
      return LaunchDtype<false>(args, plan, stream);
    case DType::kBF16:
      return LaunchDtype<true>(args, plan, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

const Launcher kGemv = {"LaunchGemv", LaunchGemv, GemvWorkspaceBytes};

}  // namespace arbiter::kernels
