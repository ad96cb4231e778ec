// Row-major matmul through the column-major cuBLAS API. cuBLAS sees a row-major
// X (r x c, leading dim ld) as the column-major X^T, so C = A B is computed as
// C^T = B^T A^T: cuBLAS's "A" is our B (n x k column-major, ld = ldb), its "B"
// is our A (k x m, ld = lda), and its C is our C^T (n x m, ld = ldc). No
// transposes are executed; only the roles swap.
#pragma once

#include <cstdint>

#include "backends/cuda/cuda_resources.h"
#include "engine/problem.h"
#include "engine/status.h"

namespace arbiter::cublas {

// cudaDataType of a dtype cuBLAS computes with f32 accumulation here, or
// UNIMPLEMENTED (f64 is not offered by these candidates).
absl::StatusOr<cudaDataType_t> CudaDataType(DType dtype);

// C[m x n] = A[m x k] * B[k x n], row-major with the given leading dimensions
// (in elements), cublasGemmEx, CUBLAS_COMPUTE_32F, default algorithm, on the
// stream the handle is bound to.
absl::Status RowMajorGemmEx(const cuda::StreamResources& res, DType dtype, int64_t m, int64_t n,
                            int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
                            void* c, int64_t ldc);

}  // namespace arbiter::cublas
