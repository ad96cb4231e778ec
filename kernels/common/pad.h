// One-pass copies of row-major matrices into contiguous ones of another shape:
// dst[r, c] = src[r * src_ld + c] where r < src_rows and c < src_cols, else 0,
// for every r < dst_rows and c < dst_cols (dst's leading dim is dst_cols).
// They pad operands to aligned leading dims - zeros included, no separate
// memset - and copy a padded C back (cublas_padded). 2- or 4-byte elements.
// Plain C++ header: no device code.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace arbiter::kernels {

struct Pad2dCopy {
  const void* src = nullptr;
  int64_t src_rows = 0, src_cols = 0, src_ld = 0;  // elements
  void* dst = nullptr;                             // 16-byte aligned
  int64_t dst_rows = 0, dst_cols = 0;              // dst's leading dim is dst_cols
};

// The most copies one launch takes (A, B and C of one GEMM).
inline constexpr int kMaxPad2dCopies = 3;

// Launch geometry: 1-D grid-stride over the copies' dst 16-byte chunks, laid
// end to end (copy 0's chunks, then copy 1's, ...; a copy's last chunk may be
// partial); each thread gathers its chunk's source elements - a 16-byte or
// four word loads when the chunk lies in one source row at an aligned
// address, four words from one element before it plus one element when it is
// 2 bytes off (an odd-width source row), element by element otherwise - and
// writes one 16-byte store (element stores in a partial chunk). One launch
// for all copies: the pads of A and B of a GEMM cost one launch and one tail,
// not two. cudaErrorInvalidValue for count outside 1..kMaxPad2dCopies, other
// element sizes, a misaligned dst or an empty dst; else the launch's error.
cudaError_t LaunchPad2dBatch(const Pad2dCopy* copies, int count, int element_bytes,
                             cudaStream_t stream);

// One copy (LaunchPad2dBatch with count 1).
cudaError_t LaunchPad2d(const void* src, int64_t src_rows, int64_t src_cols, int64_t src_ld,
                        void* dst, int64_t dst_rows, int64_t dst_cols, int element_bytes,
                        cudaStream_t stream);

}  // namespace arbiter::kernels
