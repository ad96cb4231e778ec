#include "kernels/common/pad.h"

#include <algorithm>

namespace arbiter::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 132 * 16;  // grid-stride beyond: enough to fill any SM count

// The copies of one launch, by value in the kernel's parameter space.
struct Batch {
  Pad2dCopy copy[kMaxPad2dCopies];
  // Copy j's chunks: [first_chunk[j], first_chunk[j + 1]); unused copies' ranges empty.
  int64_t first_chunk[kMaxPad2dCopies + 1];
};

template <typename T>
__device__ __forceinline__ uint32_t Element(const T* src, int64_t src_rows, int64_t src_cols,
                                            int64_t src_ld, int64_t r, int64_t c) {
  return (r < src_rows && c < src_cols) ? static_cast<uint32_t>(__ldg(src + r * src_ld + c)) : 0u;
}

// Chunk `i` of copy `cp`: the 16 / sizeof(T) elements from dst's flat index
// kPer * i on, fewer in a partial last chunk (`total` elements in dst).
template <typename T>
__device__ __forceinline__ void CopyChunk(const Pad2dCopy& cp, int64_t i, int64_t total) {
  constexpr int kPer = 16 / sizeof(T);
  const T* src = static_cast<const T*>(cp.src);
  T* dst = static_cast<T*>(cp.dst);
  const int64_t flat = kPer * i;
  int64_t r = flat / cp.dst_cols;
  int64_t c = flat % cp.dst_cols;
  uint32_t e[kPer];
  const int64_t offset = r * cp.src_ld + c;
  const T* p = src + offset;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  // The chunk lies in one source row and one dst row (a whole chunk).
  const bool in_row = flat + kPer <= total && c + kPer <= cp.src_cols && c + kPer <= cp.dst_cols &&
                      r < cp.src_rows;
  if (in_row && addr % 16 == 0) {
    reinterpret_cast<uint4*>(dst)[i] = __ldg(reinterpret_cast<const uint4*>(p));
    return;
  }
  bool loaded = false;
  if (in_row && addr % 4 == 0) {  // 4-byte aligned: word loads
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
    loaded = true;
  }
  if constexpr (sizeof(T) == 2) {
    if (!loaded && in_row && addr % 4 == 2 && offset >= 1) {
      // 2 bytes off (odd-width rows): four aligned words from the element
      // before p (inside src: offset >= 1) hold p[0..6]; p[7] alone. Five
      // loads, not eight.
      const uint32_t* w = reinterpret_cast<const uint32_t*>(p - 1);
      uint32_t word[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) word[j] = __ldg(w + j);
#pragma unroll
      for (int t = 1; t < 8; ++t) e[t - 1] = (word[t / 2] >> (16 * (t % 2))) & 0xffffu;
      e[7] = static_cast<uint32_t>(__ldg(p + 7));
      loaded = true;
    }
  }
  if (!loaded) {
    const int valid = static_cast<int>(total - flat < kPer ? total - flat : kPer);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      e[j] = j < valid ? Element(src, cp.src_rows, cp.src_cols, cp.src_ld, r, c) : 0u;
      if (++c == cp.dst_cols) {
        c = 0;
        ++r;
      }
    }
    if (valid < kPer) {  // a partial last chunk: element stores, none past dst's end
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if (j < valid) dst[flat + j] = static_cast<T>(e[j]);
      }
      return;
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

// T: uint16_t or uint32_t. A chunk is 16 bytes of dst: 16 / sizeof(T) elements.
template <typename T>
__global__ void __launch_bounds__(kThreads) Pad2dKernel(const Batch batch) {
  const int64_t chunks = batch.first_chunk[kMaxPad2dCopies];
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < chunks;
       i += int64_t{gridDim.x} * kThreads) {
    // Constant indices only: a parameter indexed by a register would be
    // copied to local memory.
    if (i < batch.first_chunk[1]) {
      CopyChunk<T>(batch.copy[0], i, batch.copy[0].dst_rows * batch.copy[0].dst_cols);
    } else if (i < batch.first_chunk[2]) {
      CopyChunk<T>(batch.copy[1], i - batch.first_chunk[1],
                   batch.copy[1].dst_rows * batch.copy[1].dst_cols);
    } else {
      CopyChunk<T>(batch.copy[2], i - batch.first_chunk[2],
                   batch.copy[2].dst_rows * batch.copy[2].dst_cols);
    }
  }
}

template <typename T>
cudaError_t Launch(const Batch& batch, cudaStream_t stream) {
  const int64_t chunks = batch.first_chunk[kMaxPad2dCopies];
  const int64_t blocks = std::clamp<int64_t>((chunks + kThreads - 1) / kThreads, 1, kMaxBlocks);
  Pad2dKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(batch);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchPad2dBatch(const Pad2dCopy* copies, int count, int element_bytes,
                             cudaStream_t stream) {
  if (count < 1 || count > kMaxPad2dCopies || (element_bytes != 2 && element_bytes != 4)) {
    return cudaErrorInvalidValue;
  }
  Batch batch{};
  const int per = 16 / element_bytes;
  for (int j = 0; j < count; ++j) {
    const Pad2dCopy& cp = copies[j];
    if (reinterpret_cast<uintptr_t>(cp.dst) % 16 != 0 || cp.dst_cols < 1 || cp.dst_rows < 1) {
      return cudaErrorInvalidValue;
    }
    batch.copy[j] = cp;
    batch.first_chunk[j + 1] = batch.first_chunk[j] + (cp.dst_rows * cp.dst_cols + per - 1) / per;
  }
  for (int j = count; j < kMaxPad2dCopies; ++j) batch.first_chunk[j + 1] = batch.first_chunk[j];
  return element_bytes == 2 ? Launch<uint16_t>(batch, stream) : Launch<uint32_t>(batch, stream);
}

cudaError_t LaunchPad2d(const void* src, int64_t src_rows, int64_t src_cols, int64_t src_ld,
                        void* dst, int64_t dst_rows, int64_t dst_cols, int element_bytes,
                        cudaStream_t stream) {
  const Pad2dCopy copy{src, src_rows, src_cols, src_ld, dst, dst_rows, dst_cols};
  return LaunchPad2dBatch(&copy, 1, element_bytes, stream);
}

}  // namespace arbiter::kernels
