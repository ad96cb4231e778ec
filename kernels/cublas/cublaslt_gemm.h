// Row-major matmul through cublasLtMatmul with the algorithm cuBLASLt's
// heuristic ranks r-th for the problem (same C^T = B^T A^T role swap as
// cublas_gemm.h). The heuristic's answer depends on the problem, the
// operands' pointer alignment and the workspace size, so it is cached per
// those; asking it costs tens of microseconds of host time per call otherwise.
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

class LtAlgorithms {
 public:
  // How many heuristic ranks are asked for (and how many candidates there can be).
  static constexpr int kRanks = 4;

  LtAlgorithms() = default;
  LtAlgorithms(const LtAlgorithms&) = delete;
  LtAlgorithms& operator=(const LtAlgorithms&) = delete;

  // Runs args' problem with the rank-th heuristic algorithm. UNIMPLEMENTED (a
  // decline) when the heuristic offers fewer than rank + 1 algorithms.
  absl::Status Run(const GemmArgs& args, int rank);

 private:
  // dtype, m, n, k, pointer alignment, workspace bytes.
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int, size_t>;
  static constexpr size_t kMaxEntries = 4096;  // bounded: cleared when full

  std::mutex mu_;
  std::map<Key, std::vector<cublasLtMatmulAlgo_t>> cache_;  // guarded by mu_
};

}  // namespace arbiter::cublas
