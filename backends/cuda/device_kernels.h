// Device-side helpers of the CUDA backend: the NaN poison fill, the random
// operand fill, the f64 reference matmul (whole, or some rows) and the counts
// the measurer's checks read. Plain launchers returning cudaError_t (the .cu side has no absl);
// backends/cuda/cuda_stream.cc turns the codes into Status.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace arbiter::cuda {

// Element encodings the device kernels read; mirrors engine DType without
// depending on it from nvcc.
enum class DeviceElem : int { kF32 = 1, kF64 = 2, kF16 = 3, kBF16 = 4 };

// Fills `count` elements of `elem_bytes` (2, 4 or 8) with the bit pattern
// `nan_bits` (the dtype's quiet NaN).
cudaError_t LaunchFill(void* data, int elem_bytes, uint64_t nan_bits, size_t count,
                       cudaStream_t stream);

// Reads `bytes` (a multiple of 16) of `data` through the L2, bypassing L1, in
// `blocks` blocks: the L2 then holds clean lines of `data` and nothing else.
// The xor of every word goes to `sink` (device memory, one unsigned) only where
// it equals `never`, which the caller picks so it does not (practically never
// written: the loads cannot be dropped, and no line is left dirty).
cudaError_t LaunchReadFlush(const void* data, size_t bytes, unsigned never, unsigned* sink,
                            int blocks, cudaStream_t stream);

// One thread that waits until the host writes `generation` to `*open`, or until
// `limit_ns` of the device's global timer have passed, when it writes `generation`
// to `*expired` instead. Both words are mapped page-locked host memory. Work
// enqueued behind it on `stream` starts only then, back to back, however long the
// host took to enqueue it.
cudaError_t LaunchHold(const volatile unsigned* open, unsigned generation, uint64_t limit_ns,
                       volatile unsigned* expired, cudaStream_t stream);

// Fills `count` elements of `elem_bytes` (2, 4 or 8) from a 2^16-entry `table`
// (device memory) as engine/random_fill.h describes: element i is the entry
// picked by SplitMix64(key + i), its sign bit flipped by bit 16 of that hash.
cudaError_t LaunchFillFromTable(void* data, int elem_bytes, const void* table, uint64_t key,
                                size_t count, cudaStream_t stream);

// ref[i*n + j] = sum_k A[i,k] * B[k,j] in f64, over row-major A (m x k) and
// B (k x n) as stored in `elem`. 64x64 output tile per 256-thread block, K
// walked in tiles of 16 staged through shared memory as doubles; grid x walks
// N tiles, grid y walks M tiles (y limited to 65535 tiles: m <= 4194240).
cudaError_t LaunchReference(DeviceElem elem, const void* a, const void* b, double* ref, int64_t m,
                            int64_t n, int64_t k, cudaStream_t stream);

// The same sums for the listed rows of A only: ref[r*n + j] for row rows[r]
// (`rows` in device memory, `row_count` <= 4194240 of them).
cudaError_t LaunchReferenceRows(DeviceElem elem, const void* a, const void* b,
                                const int64_t* rows, int64_t row_count, double* ref, int64_t n,
                                int64_t k, cudaStream_t stream);

// Adds to *counter (device memory) how many of `count` elements are NaN or Inf.
cudaError_t LaunchCountNonFinite(DeviceElem elem, const void* data, size_t count,
                                 unsigned long long* counter, cudaStream_t stream);

// Adds to *counter how many of `count` elements of `elem_bytes` (2, 4 or 8)
// differ bitwise between x and y.
cudaError_t LaunchCountDifferences(int elem_bytes, const void* x, const void* y, size_t count,
                                   unsigned long long* counter, cudaStream_t stream);

}  // namespace arbiter::cuda
