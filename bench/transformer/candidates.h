// The candidates transformer_bench checks and times on each problem: cuBLAS,
// cuBLASLt's first heuristic ranks, the padded cuBLAS paths, and every CUDA
// family the daemon would race, at the coverage its kernels/*/*_candidate.cc
// registers, beside bench-only baselines and experiments. A candidate is a
// name, an accuracy budget, what it covers and how it runs on a stream; the
// runners live in candidates.cu, behind Candidates().
// Not thread-safe: the candidates share one Context (g) and one scratch.
// Bench tool: CUDA errors exit on the spot, naming the call.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"

namespace arbiter::transformer_bench {

// Names the bench's files share.
using arbiter::DType;
namespace k = arbiter::kernels;
namespace gc = arbiter::gemm_check;
using gc::CheckResult;
using gc::Op;
using gc::kGuardBytes;
using gc::Percentile;

// The handles and scratch every candidate runs with; main() opens them before
// any candidate runs.
struct Context {
  int sm_count = 0;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* lt_workspace = nullptr;
  size_t lt_workspace_bytes = 64ull << 20;  // the daemon's per-stream cuBLASLt workspace
  // cuBLASLt heuristic ranks asked for (--lt-ranks): the first kLtRacedRanks are
  // what the daemon races (kernels/cublas/cublaslt_gemm.h); later ones are
  // bench-only, to see what the heuristic's lower ranks would add.
  int lt_ranks = 4;
  gc::Scratch workspace;
};
extern Context g;
inline constexpr int kLtRacedRanks = 4;

struct Candidate {
  std::string name;
  double abs, rel;  // accuracy budget (engine/contract.h)
  std::function<bool(const Op&)> covers;
  std::function<void(const Op&, cudaStream_t)> run;
  // Registered in kernels/registry (the daemon races it); the others are bench
  // baselines and experiments, measured but never counted as served.
  bool raced = true;
};

// Every candidate, in the order the tables list them (cuBLAS first).
std::vector<Candidate> Candidates();

}  // namespace arbiter::transformer_bench
