#include "kernels/common/pad.h"

#include <algorithm>

namespace arbiter::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 132 * 16;  // grid-stride beyond: enough to fill any SM count

template <typename T>
__device__ __forceinline__ uint32_t Element(const T* src, int64_t src_rows, int64_t src_cols,
                                            int64_t src_ld, int64_t r, int64_t c) {
  return (r < src_rows && c < src_cols) ? static_cast<uint32_t>(__ldg(src + r * src_ld + c)) : 0u;
}

// T: uint16_t or uint32_t. A chunk is 16 bytes of dst: 16 / sizeof(T) elements.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    Pad2dKernel(const T* __restrict__ src, int64_t src_rows, int64_t src_cols, int64_t src_ld,
                T* __restrict__ dst, int64_t dst_cols, int64_t total) {
  constexpr int kPer = 16 / sizeof(T);
  const int64_t chunks = total / kPer;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < chunks;
       i += int64_t{gridDim.x} * kThreads) {
    int64_t r = (kPer * i) / dst_cols;
    int64_t c = (kPer * i) % dst_cols;
    uint32_t e[kPer];
    const T* p = src + r * src_ld + c;
    if (c + kPer <= src_cols && r < src_rows && reinterpret_cast<uintptr_t>(p) % 4 == 0) {
      // The chunk lies in one source row, 4-byte aligned: word loads.
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t w = __ldg(reinterpret_cast<const uint32_t*>(p) + j);
        if constexpr (sizeof(T) == 2) {
          e[2 * j] = w & 0xffffu;
          e[2 * j + 1] = w >> 16;
        } else {
          e[j] = w;
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        e[j] = Element(src, src_rows, src_cols, src_ld, r, c);
        if (++c == dst_cols) {
          c = 0;
          ++r;
        }
      }
    }
    uint4 v;
    if constexpr (sizeof(T) == 2) {
      v = make_uint4(e[0] | (e[1] << 16), e[2] | (e[3] << 16), e[4] | (e[5] << 16),
                     e[6] | (e[7] << 16));
    } else {
      v = make_uint4(e[0], e[1], e[2], e[3]);
    }
    reinterpret_cast<uint4*>(dst)[i] = v;
  }
  // The elements past the last whole chunk.
  if (blockIdx.x == 0 && threadIdx.x < total - kPer * chunks) {
    const int64_t f = kPer * chunks + threadIdx.x;
    dst[f] = static_cast<T>(Element(src, src_rows, src_cols, src_ld, f / dst_cols, f % dst_cols));
  }
}

template <typename T>
cudaError_t Launch(const void* src, int64_t src_rows, int64_t src_cols, int64_t src_ld, void* dst,
                   int64_t total, int64_t dst_cols, cudaStream_t stream) {
  constexpr int kPer = 16 / sizeof(T);
  const int64_t blocks = std::clamp<int64_t>((total / kPer + kThreads - 1) / kThreads, 1, kMaxBlocks);
  Pad2dKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const T*>(src), src_rows, src_cols, src_ld, static_cast<T*>(dst), dst_cols, total);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchPad2d(const void* src, int64_t src_rows, int64_t src_cols, int64_t src_ld,
                        void* dst, int64_t dst_rows, int64_t dst_cols, int element_bytes,
                        cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || dst_cols < 1 || dst_rows < 1) {
    return cudaErrorInvalidValue;
  }
  const int64_t total = dst_rows * dst_cols;
  switch (element_bytes) {
    case 2:
      return Launch<uint16_t>(src, src_rows, src_cols, src_ld, dst, total, dst_cols, stream);
    case 4:
      return Launch<uint32_t>(src, src_rows, src_cols, src_ld, dst, total, dst_cols, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace arbiter::kernels
