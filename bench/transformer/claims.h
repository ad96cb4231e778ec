// The claims transformer_bench checks before timing, beyond the shapes it
// times: skinny's ragged and misaligned paths in both dtypes, run-to-run
// bitwise repeats and batch invariance (SkinnyClaims), and a candidate's own
// ragged shapes against the full reference, then run-to-run bits
// (RaggedChecks). Each prints a line per check and returns its failure count.
// Bench tool: CUDA errors exit on the spot, naming the call.
#pragma once

#include <vector>

#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "bench/transformer/candidates.h"
#include "bench/transformer/problem.h"

namespace arbiter::transformer_bench {

// skinny's own claims: ragged paths, run-to-run, batch invariance.
int SkinnyClaims(const Candidate& skinny, cudaStream_t st, gc::Checker& checker);

// A candidate's own ragged shapes, full reference, then run-to-run bits.
int RaggedChecks(const Candidate& cand, const std::vector<Shape>& shapes, cudaStream_t st,
                 gc::Checker& checker);

}  // namespace arbiter::transformer_bench
