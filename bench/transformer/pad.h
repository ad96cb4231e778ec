// A one-pass copy of a row-major 16-bit matrix into a contiguous one of another
// shape: dst[r, c] = src[r * src_ld + c] where r < src_rows and c < src_cols,
// else 0, for every r < dst_rows, c < dst_cols (dst's leading dim is dst_cols).
// Pads an operand to aligned leading dims (zeros included, no separate memset)
// and copies a padded C back. Bench prototype of the copy cublas_padded needs.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace arbiter::bench {

cudaError_t LaunchPad2d(const void* src, int64_t src_rows, int64_t src_cols, int64_t src_ld,
                        void* dst, int64_t dst_rows, int64_t dst_cols, cudaStream_t stream);

}  // namespace arbiter::bench
