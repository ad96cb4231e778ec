// Row-major matmul through cublasLtMatmul with the algorithm cuBLASLt's
// heuristic ranks r-th for the problem (same C^T = B^T A^T role swap as
// cublas_gemm.h). The heuristic's answer depends on the problem, the leading
// dims, the alignment the preference promises per operand and the workspace
// size, so it is cached per those; asking it costs tens of microseconds of
// host time per call otherwise.
//
// Thread-safe: the cache has one mutex; several streams may share one object.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_resources.h"
#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter::cublas {

// One row-major C[m x n] = A[m x k] B[k x n] with leading dims (elements) and
// the alignment in bytes the preference promises for each operand (cuBLASLt
// offers only algorithms that work at that alignment).
struct LtMatmul {
  DType dtype = DType::kF32;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int align_a = 256, align_b = 256, align_c = 256;  // C's also stands for D (the same matrix)
};

// The largest power of two (up to 256) dividing the pointer and the row pitch
// ld * element_bytes: what every row of the matrix is aligned to.
int RowAlignment(const void* p, int64_t ld, size_t element_bytes);

class LtAlgorithms {
 public:
  // How many heuristic ranks are asked for (and how many candidates there can be).
  static constexpr int kRanks = 4;

  LtAlgorithms() = default;
  LtAlgorithms(const LtAlgorithms&) = delete;
  LtAlgorithms& operator=(const LtAlgorithms&) = delete;

  // Runs args' problem (packed leading dims) with the rank-th heuristic
  // algorithm, promising the alignment common to the three pointers.
  // UNIMPLEMENTED (a decline) when the heuristic offers fewer than rank + 1
  // algorithms.
  absl::Status Run(const GemmArgs& args, int rank);

  // Runs `mm` on res's stream with the rank-th heuristic algorithm; the same
  // decline.
  absl::Status Run(const LtMatmul& mm, const cuda::StreamResources& res, int rank);

  // OK when Run(mm, res, rank) would find its algorithm (the same decline
  // otherwise); asks and caches the heuristic, launches nothing.
  absl::Status Offers(const LtMatmul& mm, const cuda::StreamResources& res, int rank);

 private:
  absl::Status RunOrAsk(const LtMatmul& mm, const cuda::StreamResources& res, int rank,
                        bool launch);

  // dtype, m, n, k, lda, ldb, ldc, alignments of A, B, C, workspace bytes.
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int,
                         size_t>;
  static constexpr size_t kMaxEntries = 4096;  // bounded: cleared when full

  std::mutex mu_;
  std::map<Key, std::vector<cublasLtMatmulAlgo_t>> cache_;  // guarded by mu_
};

}  // namespace arbiter::cublas
