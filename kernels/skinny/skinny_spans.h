// The arithmetic of skinny_stream's span path (skinny_stream.h,
// kSkinnyStreamRagged), shared by the kernel and its device-free tests: which
// 16-byte chunks of B land in a stage row, how many of their bytes are copied,
// and where a column of the strip lands. Offsets are in elements from B's
// start, which the span path requires 16-byte aligned, so an element offset
// that is a multiple of 8 is a 16-byte aligned address.
// Plain C++ header (host and device): no CUDA runtime, no absl.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ARBITER_SPAN_FN __host__ __device__ __forceinline__
#else
#define ARBITER_SPAN_FN inline
#endif

namespace arbiter::kernels {

// 16-byte chunks that cover the aligned-down span of a strip row of `columns`
// columns: up to 7 elements before the row's first column, so one more than
// columns / 8.
ARBITER_SPAN_FN constexpr int SkinnySpanChunks(int columns) { return columns / 8 + 1; }

// Elements between the 16-byte boundary below B[row, n0] and B[row, n0] (N
// columns per row): the landing row holds column n at n - n0 + this. For the
// kernel's rows (k_chunk a multiple of 32, n0 of 128), the same in every stage.
ARBITER_SPAN_FN int64_t SkinnySpanMisalignment(int64_t row, int64_t n, int64_t n0) {
  return (row * n + n0) % 8;
}

// Chunk `chunk` of the span of B[row, n0..]: its first element (a multiple of
// 8) and how many of its 16 bytes land from B. The copy stops at the end of B's
// row `row` (the rest lands as zeros), so columns n >= N are zero.
struct SkinnySpanChunk {
  int64_t first = 0;  // element offset of the chunk from B's start
  int bytes = 0;      // 0-16 bytes copied; zeros after them
};
ARBITER_SPAN_FN SkinnySpanChunk SkinnySpanChunkAt(int64_t row, int64_t n, int64_t n0, int chunk) {
  const int64_t start = row * n + n0;
  SkinnySpanChunk c;
  c.first = start - start % 8 + 8 * int64_t{chunk};
  const int64_t left = row * n + n - c.first;  // elements of the row from the chunk on
  c.bytes = left <= 0 ? 0 : (left >= 8 ? 16 : static_cast<int>(2 * left));
  return c;
}

// How the kernel moves a chunk that starts at element `first` with `bytes` of
// B in it, B holding `b_elements` elements: a cp.async of 16 bytes with
// src-size `bytes` is not trusted to read fewer than its 16 (the H200's
// compute-sanitizer reports the whole 16-byte window of a src-size-10 copy
// as read: bench/results/skinny-h200.md, run 8), so a chunk whose window
// crosses B's end - only the chunk holding B[K - 1, N - 1] when K N % 8 != 0,
// or any chunk of a B under 8 elements - is moved by element loads of its
// `bytes` and a 16-byte shared store (zeros after them). A chunk with no byte
// of B is a src-size-0 copy from B's start: zeros, nothing read.
enum class SkinnySpanCopy { kZeros, kCpAsync16, kElements };
ARBITER_SPAN_FN SkinnySpanCopy SkinnySpanCopyOf(int64_t first, int bytes, int64_t b_elements) {
  if (bytes <= 0) return SkinnySpanCopy::kZeros;
  return first + 8 <= b_elements ? SkinnySpanCopy::kCpAsync16 : SkinnySpanCopy::kElements;
}

}  // namespace arbiter::kernels

#undef ARBITER_SPAN_FN
