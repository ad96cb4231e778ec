// A one-pass copy of a row-major matrix into a contiguous one of another shape:
// dst[r, c] = src[r * src_ld + c] where r < src_rows and c < src_cols, else 0,
// for every r < dst_rows and c < dst_cols (dst's leading dim is dst_cols).
// It pads an operand to aligned leading dims - zeros included, no separate
// memset - and copies a padded C back (cublas_padded). 2- or 4-byte elements.
// Plain C++ header: no device code.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace arbiter::kernels {

// Launch geometry: 1-D grid-stride over dst in 16-byte chunks of its flat
// index (8 or 4 elements); each thread gathers its chunk's source elements -
// whole words when they lie in one source row at an aligned address, element
// by element otherwise - and writes one 16-byte store. dst must be 16-byte
// aligned. cudaErrorInvalidValue for other element sizes, a misaligned dst or
// an empty dst; else the launch's error.
cudaError_t LaunchPad2d(const void* src, int64_t src_rows, int64_t src_cols, int64_t src_ld,
                        void* dst, int64_t dst_rows, int64_t dst_cols, int element_bytes,
                        cudaStream_t stream);

}  // namespace arbiter::kernels
