// Launch geometry: a 1-D grid-stride loop over dst in 8-element (16-byte)
// chunks of its flat index; each thread gathers its 8 source elements - four
// 4-byte loads when they lie in one source row at a 4-byte boundary, else
// 2-byte loads (consecutive threads read consecutive source bytes, so the
// loads of a warp share cache lines) - and writes one 16-byte store. dst must be
// 16-byte aligned; the last partial chunk is written element by element.
#include "bench/transformer/pad.h"

#include <algorithm>

namespace arbiter::bench {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t Source(const uint16_t* src, int64_t src_rows, int64_t src_cols,
                                           int64_t src_ld, int64_t r, int64_t c) {
  return (r < src_rows && c < src_cols) ? static_cast<uint32_t>(__ldg(src + r * src_ld + c)) : 0u;
}

__global__ void __launch_bounds__(kThreads)
    Pad2dKernel(const uint16_t* __restrict__ src, int64_t src_rows, int64_t src_cols, int64_t src_ld,
                uint16_t* __restrict__ dst, int64_t dst_cols, int64_t total) {
  const int64_t chunks = total / 8;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < chunks;
       i += int64_t{gridDim.x} * kThreads) {
    int64_t r = (8 * i) / dst_cols;
    int64_t c = (8 * i) % dst_cols;
    uint32_t e[8];
    const uint16_t* p = src + r * src_ld + c;
    if (c + 8 <= src_cols && r < src_rows && reinterpret_cast<uintptr_t>(p) % 4 == 0) {
      // The whole chunk inside one source row, 4-byte aligned: 4 word loads.
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t w = __ldg(reinterpret_cast<const uint32_t*>(p) + j);
        e[2 * j] = w & 0xffffu;
        e[2 * j + 1] = w >> 16;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        e[j] = Source(src, src_rows, src_cols, src_ld, r, c);
        if (++c == dst_cols) {
          c = 0;
          ++r;
        }
      }
    }
    reinterpret_cast<uint4*>(dst)[i] =
        make_uint4(e[0] | (e[1] << 16), e[2] | (e[3] << 16), e[4] | (e[5] << 16), e[6] | (e[7] << 16));
  }
  // The tail past the last whole chunk.
  if (blockIdx.x == 0 && threadIdx.x < total - 8 * chunks) {
    const int64_t f = 8 * chunks + threadIdx.x;
    dst[f] = static_cast<uint16_t>(Source(src, src_rows, src_cols, src_ld, f / dst_cols, f % dst_cols));
  }
}

}  // namespace

cudaError_t LaunchPad2d(const void* src, int64_t src_rows, int64_t src_cols, int64_t src_ld,
                        void* dst, int64_t dst_rows, int64_t dst_cols, cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || dst_cols < 1 || dst_rows < 1) {
    return cudaErrorInvalidValue;
  }
  const int64_t total = dst_rows * dst_cols;
  const int64_t blocks = std::clamp<int64_t>((total / 8 + kThreads - 1) / kThreads, 1, 132 * 16);
  Pad2dKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const uint16_t*>(src), src_rows, src_cols, src_ld, static_cast<uint16_t*>(dst),
      dst_cols, total);
  return cudaGetLastError();
}

}  // namespace arbiter::bench
