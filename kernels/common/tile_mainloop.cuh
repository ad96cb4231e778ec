// The CTA-tiled mma.sync main loop shared by mma_tiled and splitk (device code
// only; included by .cu files). A CTA computes a BM x BN tile of C over a K
// range: operands stream through a multi-stage shared-memory ring of 16-byte
// cp.async copies (src-size zero-fill at the edges), ldmatrix feeds
// mma.sync.m16n8k16, accumulators stay in f32 registers.
//
// Operand rule: rows of A start lda elements apart and rows of B ldb apart, with
// lda, ldb multiples of 8 and A, B 16-byte aligned, so an 8-element chunk is one
// aligned 16-byte copy. A chunk that starts inside the matrix but runs past
// column K of A or N of B reads the row's padding, which must hold zeros: either
// K % 8 == 0 and N % 8 == 0 (no padding), or the operands were copied into
// zero-padded scratch by PadColumnsKernel first.
//
// Numerics: every element of C is accumulated over K in 16-wide steps from
// k_begin upwards into one f32 register, whatever BM and BN, and padding adds
// exact zeros. So neither the tile shape nor the padding changes the bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/common/mma_sync.cuh"

namespace arbiter::kernels::mma_tile {

template <int BM, int BN, int BK, int WarpsM, int WarpsN, int Stages>
struct TileShape {
  static constexpr int kBM = BM;
  static constexpr int kBN = BN;
  static constexpr int kBK = BK;
  static constexpr int kWarpsN = WarpsN;
  static constexpr int kStages = Stages;
  static constexpr int kThreads = WarpsM * WarpsN * 32;
  static constexpr int kWarpTileM = BM / WarpsM;
  static constexpr int kWarpTileN = BN / WarpsN;
  static constexpr int kFragsM = kWarpTileM / 16;  // m16 fragments per warp
  static constexpr int kFragsN = kWarpTileN / 8;   // n8 fragments per warp
  // Rows padded by 8 elements (16 bytes): the 8 row addresses of one ldmatrix
  // 8x8 matrix then fall in 8 different 16-byte bank groups (conflict-free).
  static constexpr int kAStride = BK + 8;
  static constexpr int kBStride = BN + 8;
  static constexpr int kAStageElems = BM * kAStride;
  static constexpr int kBStageElems = BK * kBStride;
  static constexpr int kSmemBytes = Stages * (kAStageElems + kBStageElems) * 2;
  static constexpr int kAChunks = BM * BK / 8 / kThreads;  // 8-element chunks per thread
  static constexpr int kBChunks = BK * BN / 8 / kThreads;

  static_assert(BM % (16 * WarpsM) == 0 && BN % (16 * WarpsN) == 0);
  static_assert(kFragsN % 2 == 0, "B fragments are loaded in pairs by ldmatrix.x4.trans");
  static_assert(BK % 16 == 0);
  static_assert(Stages >= 2);
  static_assert(kAChunks >= 1 && kAChunks * kThreads * 8 == BM * BK);
  static_assert(kBChunks >= 1 && kBChunks * kThreads * 8 == BK * BN);
  static_assert((kAStride * 2) % 16 == 0 && (kBStride * 2) % 16 == 0);
};

__device__ __forceinline__ uint32_t SmemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy; bytes past src_bytes (0 or 16) are zero-filled.
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

template <class Shape>
using Accumulators = float[Shape::kFragsM][Shape::kFragsN][4];

// Accumulates A[m0:m0+BM, k_begin:k_end] x B[k_begin:k_end, n0:n0+BN] into
// `acc` (which the caller zeroes), under the operand rule above. All threads of
// the CTA must call it. `smem` holds Shape::kSmemBytes, 16-byte aligned.
// k_end - k_begin >= 1; k_begin is a multiple of 8, and so is k_end unless it
// is K.
template <class Shape, bool kBf16>
__device__ __forceinline__ void Mainloop(const uint16_t* __restrict__ a, int lda,
                                         const uint16_t* __restrict__ b, int ldb, int m, int n,
                                         int m0, int n0, int k_begin, int k_end, uint16_t* smem,
                                         Accumulators<Shape>& acc) {
  constexpr int BN = Shape::kBN, BK = Shape::kBK, S = Shape::kStages;
  uint16_t* const a_smem = smem;
  uint16_t* const b_smem = smem + S * Shape::kAStageElems;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int warp_m = warp / Shape::kWarpsN;
  const int warp_n = warp % Shape::kWarpsN;
  const int ktiles = (k_end - k_begin + BK - 1) / BK;

  // Chunk c of the A tile: row c / (BK/8), columns (c % (BK/8)) * 8 ... + 8.
  // Chunk c of the B tile: row c / (BN/8), columns (c % (BN/8)) * 8 ... + 8.
  auto a_chunk = [&](int i, int& row, int& col) {
    const int c = tid + i * Shape::kThreads;
    row = c / (BK / 8);
    col = (c % (BK / 8)) * 8;
  };
  auto b_chunk = [&](int i, int& row, int& col) {
    const int c = tid + i * Shape::kThreads;
    row = c / (BN / 8);
    col = (c % (BN / 8)) * 8;
  };

  auto issue_async = [&](int kt, int stage) {
    const int kbase = k_begin + kt * BK;
#pragma unroll
    for (int i = 0; i < Shape::kAChunks; ++i) {
      int row, col;
      a_chunk(i, row, col);
      const int gm = m0 + row, gk = kbase + col;
      const bool ok = gm < m && gk < k_end;
      const uint16_t* src = ok ? a + static_cast<int64_t>(gm) * lda + gk : a;
      CpAsync16(SmemAddress(a_smem + stage * Shape::kAStageElems + row * Shape::kAStride + col),
                src, ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < Shape::kBChunks; ++i) {
      int row, col;
      b_chunk(i, row, col);
      const int gk = kbase + row, gn = n0 + col;
      const bool ok = gk < k_end && gn < n;
      const uint16_t* src = ok ? b + static_cast<int64_t>(gk) * ldb + gn : b;
      CpAsync16(SmemAddress(b_smem + stage * Shape::kBStageElems + row * Shape::kBStride + col),
                src, ok ? 16 : 0);
    }
  };

  auto compute_stage = [&](int stage) {
    const uint16_t* as = a_smem + stage * Shape::kAStageElems;
    const uint16_t* bs = b_smem + stage * Shape::kBStageElems;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[Shape::kFragsM][4];
      uint32_t bf[Shape::kFragsN][2];
      // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
      // (rows 8-15, k 8-15) = fragment registers a0..a3; lane l addresses row
      // l % 16 at k offset (l / 16) * 8.
#pragma unroll
      for (int i = 0; i < Shape::kFragsM; ++i) {
        const int row = warp_m * Shape::kWarpTileM + i * 16 + lane % 16;
        LdMatrixX4(af[i], SmemAddress(as + row * Shape::kAStride + kk + (lane / 16) * 8));
      }
      // B (k-major rows in shared memory), transposed on load: matrices
      // (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15) =
      // b0, b1 of fragment j and b0, b1 of fragment j + 1.
#pragma unroll
      for (int j = 0; j < Shape::kFragsN; j += 2) {
        const int col = warp_n * Shape::kWarpTileN + j * 8 + (lane / 16) * 8;
        uint32_t r[4];
        LdMatrixX4Trans(r, SmemAddress(bs + (kk + lane % 16) * Shape::kBStride + col));
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < Shape::kFragsM; ++i) {
#pragma unroll
        for (int j = 0; j < Shape::kFragsN; ++j) Mma16816<kBf16>(acc[i][j], af[i], bf[j]);
      }
    }
  };

  // Prologue: tiles 0 .. S-2 in flight (one commit group each, empty ones too,
  // so that the group count below stays exact).
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < ktiles) issue_async(s, s);
    CpAsyncCommit();
  }

  // At least 3 stages keep two tiles in flight while one is computed, which
  // hides the global-memory latency behind the mma work of a stage.
  for (int kt = 0; kt < ktiles; ++kt) {
    CpAsyncWait<S - 2>();  // tile kt has landed
    __syncthreads();       // ... for every thread; and stage (kt-1) % S is free again
    const int next = kt + S - 1;
    if (next < ktiles) issue_async(next, next % S);
    CpAsyncCommit();
    compute_stage(kt % S);
  }
  CpAsyncWait<0>();
}

// Calls f(row, col, v0, v1) for each pair of horizontally adjacent accumulators
// (columns col and col + 1) of this thread; rows and columns may lie past M, N.
template <class Shape, class F>
__device__ __forceinline__ void ForEachAccumulatorPair(const Accumulators<Shape>& acc, int m0,
                                                       int n0, F&& f) {
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int row_base = m0 + (warp / Shape::kWarpsN) * Shape::kWarpTileM + lane / 4;
  const int col_base = n0 + (warp % Shape::kWarpsN) * Shape::kWarpTileN + 2 * (lane % 4);
#pragma unroll
  for (int i = 0; i < Shape::kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < Shape::kFragsN; ++j) {
      const int row = row_base + i * 16;
      const int col = col_base + j * 8;
      f(row, col, acc[i][j][0], acc[i][j][1]);
      f(row + 8, col, acc[i][j][2], acc[i][j][3]);
    }
  }
}

// dst[r, c] = src[r, c] for c < cols, 0 for cols <= c < ld: copies a row-major
// matrix into scratch whose rows are ld (a multiple of 8) apart, zero-padded,
// for the operand rule above. 1-D grid-stride over rows * ld elements, in
// 2-element words (ld is even). A template only so that the .cu files including
// this header each get their own instance without a duplicate symbol.
template <typename Element = uint16_t>
__global__ void __launch_bounds__(256)
    PadColumnsKernel(const Element* __restrict__ src, int64_t rows, int64_t cols,
                     uint32_t* __restrict__ dst, int64_t ld) {
  const int64_t words = rows * ld / 2;
  for (int64_t w = blockIdx.x * int64_t{256} + threadIdx.x; w < words;
       w += int64_t{gridDim.x} * 256) {
    const int64_t r = (2 * w) / ld;
    const int64_t c = (2 * w) % ld;
    const Element* row = src + r * cols;
    const uint32_t lo = c < cols ? row[c] : 0u;
    const uint32_t hi = c + 1 < cols ? row[c + 1] : 0u;
    dst[w] = lo | (hi << 16);
  }
}

// Where an operand lives for the main loop: the caller's buffer when it already
// meets the operand rule, else zero-padded scratch.
struct Operand {
  const uint16_t* data = nullptr;
  int ld = 0;
};

inline int64_t RoundUp8(int64_t x) { return (x + 7) / 8 * 8; }
inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Bytes of scratch for a padded copy of a rows x cols operand (256-byte multiple).
inline size_t PaddedBytes(int64_t rows, int64_t cols) {
  return (static_cast<size_t>(rows * RoundUp8(cols)) * 2 + 255) / 256 * 256;
}

// Padding needed for A [m, k] and B [k, n] as given: none when K and N are
// multiples of 8 and both pointers 16-byte aligned.
inline bool NeedsPadding(const void* a, const void* b, int64_t n, int64_t k) {
  return k % 8 != 0 || n % 8 != 0 || !Aligned16(a) || !Aligned16(b);
}

// Enqueues the zero-padded copy of a rows x cols operand into `scratch` (at
// least PaddedBytes(rows, cols), 16-byte aligned) and returns where it lives.
inline cudaError_t PadOperand(const void* src, int64_t rows, int64_t cols, void* scratch,
                              cudaStream_t stream, Operand* out) {
  const int64_t ld = RoundUp8(cols);
  const int64_t words = rows * ld / 2;
  const int64_t blocks = std::min<int64_t>((words + 255) / 256, int64_t{1} << 16);
  PadColumnsKernel<uint16_t><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      static_cast<const uint16_t*>(src), rows, cols, static_cast<uint32_t*>(scratch), ld);
  out->data = static_cast<const uint16_t*>(scratch);
  out->ld = static_cast<int>(ld);
  return cudaGetLastError();
}

}  // namespace arbiter::kernels::mma_tile
