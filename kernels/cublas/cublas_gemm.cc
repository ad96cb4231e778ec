#include "kernels/cublas/cublas_gemm.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_check.h"

namespace arbiter::cublas {

absl::StatusOr<cudaDataType_t> CudaDataType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    default: break;
  }
  return absl::UnimplementedError(absl::StrCat("cuBLAS candidates take no ", DTypeName(dtype)));
}

absl::Status RowMajorGemmEx(const cuda::StreamResources& res, DType dtype, int64_t m, int64_t n,
                            int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
                            void* c, int64_t ldc) {
  for (int64_t v : {m, n, k, lda, ldb, ldc}) {
    if (v > INT_MAX) {
      return absl::UnimplementedError(absl::StrCat("cublasGemmEx takes 32-bit dims, got ", v));
    }
  }
  ASSIGN_OR_RETURN(cudaDataType_t type, CudaDataType(dtype));
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_RETURN_IF_ERROR(cublasGemmEx(
      res.cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), &alpha, b, type, static_cast<int>(ldb), a, type, static_cast<int>(lda),
      &beta, c, type, static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

}  // namespace arbiter::cublas
