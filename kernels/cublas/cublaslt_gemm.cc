#include "kernels/cublas/cublaslt_gemm.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_check.h"
#include "kernels/cublas/cublas_gemm.h"

namespace arbiter::cublas {
namespace {

// The largest power of two (up to 256) dividing every pointer: cuBLASLt picks
// vectorized kernels only for what the preference says is aligned.
int CommonAlignment(const void* a, const void* b, const void* c) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                         reinterpret_cast<uintptr_t>(c) | 256;
  return static_cast<int>(bits & (~bits + 1));
}

// Owns the cuBLASLt descriptors of one call.
struct LtDescriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's roles
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescriptors() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (matmul != nullptr) cublasLtMatmulDescDestroy(matmul);
  }
};

}  // namespace

int RowAlignment(const void* p, int64_t ld, size_t element_bytes) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(p) |
                         static_cast<uintptr_t>(ld) * element_bytes | 256;
  return static_cast<int>(bits & (~bits + 1));
}

absl::Status LtAlgorithms::Run(const GemmArgs& args, int rank) {
  const Problem& p = args.problem;
  LtMatmul mm;
  mm.dtype = p.dtype;
  mm.m = p.m;
  mm.n = p.n;
  mm.k = p.k;
  mm.a = args.a;
  mm.lda = p.k;
  mm.b = args.b;
  mm.ldb = p.n;
  mm.c = args.c;
  mm.ldc = p.n;
  mm.align_a = mm.align_b = mm.align_c = CommonAlignment(args.a, args.b, args.c);
  return Run(mm, cuda::Resources(args.stream), rank);
}

absl::Status LtAlgorithms::Run(const LtMatmul& mm, const cuda::StreamResources& res, int rank) {
  return RunOrAsk(mm, res, rank, /*launch=*/true);
}

absl::Status LtAlgorithms::Offers(const LtMatmul& mm, const cuda::StreamResources& res,
                                  int rank) {
  return RunOrAsk(mm, res, rank, /*launch=*/false);
}

absl::Status LtAlgorithms::RunOrAsk(const LtMatmul& mm, const cuda::StreamResources& res,
                                    int rank, bool launch) {
  ASSIGN_OR_RETURN(cudaDataType_t type, CudaDataType(mm.dtype));
  if (rank < 0 || rank >= kRanks) {
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt heuristic rank ", rank));
  }
  LtDescriptors d;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&d.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Roles swapped for row-major (see cublas_gemm.h): Lt's A is our B (n x k,
  // ld ldb), Lt's B is our A (k x m, ld lda), C is our C^T (n x m, ld ldc).
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&d.a, type, mm.n, mm.k, mm.ldb));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&d.b, type, mm.k, mm.m, mm.lda));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&d.c, type, mm.n, mm.m, mm.ldc));

  const Key key{static_cast<int>(mm.dtype), mm.m,       mm.n,       mm.k,
                mm.lda,                     mm.ldb,     mm.ldc,     mm.align_a,
                mm.align_b,                 mm.align_c, res.lt_workspace_bytes};
  std::vector<cublasLtMatmulAlgo_t> algos;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) algos = it->second;
  }
  if (algos.empty()) {
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&d.pref));
    const size_t workspace = res.lt_workspace_bytes;
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
        d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    // Split-K partials only in f32 workspace: the INPLACE and OUTPUT_TYPE schemes
    // add partials in C's dtype, which in bf16 measured 3.4e-3 relative error at
    // 777x333x2049 on the H200 - not the f32 accumulation these candidates declare.
    const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
        d.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof(reduction)));
    // Lt's A is our B and Lt's B our A; C and D are the same matrix.
    const std::pair<cublasLtMatmulPreferenceAttributes_t, int> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, mm.align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, mm.align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, mm.align_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, mm.align_c}};
    for (const auto& [attr, bytes] : aligns) {
      const uint32_t align = static_cast<uint32_t>(bytes);
      CUBLAS_RETURN_IF_ERROR(
          cublasLtMatmulPreferenceSetAttribute(d.pref, attr, &align, sizeof(align)));
    }
    cublasLtMatmulHeuristicResult_t results[kRanks] = {};
    int found = 0;
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(res.cublas_lt, d.matmul, d.a, d.b, d.c,
                                                          d.c, d.pref, kRanks, results, &found));
    for (int i = 0; i < found; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
      uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
      size_t written = 0;
      CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoConfigGetAttribute(
          &results[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme),
          &written));
      // The preference mask should already exclude these; the algorithm is checked anyway.
      if (scheme != CUBLASLT_REDUCTION_SCHEME_NONE &&
          scheme != CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) {
        continue;
      }
      algos.push_back(results[i].algo);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_.size() >= kMaxEntries) cache_.clear();
    cache_[key] = algos;
  }
  if (rank >= static_cast<int>(algos.size())) {
    return absl::UnimplementedError(absl::StrCat(
        "cuBLASLt heuristic offers ", algos.size(), " algorithms for ", mm.m, "x", mm.n, "x", mm.k,
        " ", DTypeName(mm.dtype), " (ld ", mm.lda, "/", mm.ldb, "/", mm.ldc, ", aligned ",
        mm.align_a, "/", mm.align_b, "/", mm.align_c, " bytes), rank ", rank, " asked"));
  }
  if (!launch) return absl::OkStatus();
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(res.cublas_lt, d.matmul, &alpha, mm.b, d.a, mm.a, d.b,
                                        &beta, mm.c, d.c, mm.c, d.c, &algos[rank],
                                        res.lt_workspace, res.lt_workspace_bytes, res.stream));
  return absl::OkStatus();
}

}  // namespace arbiter::cublas
