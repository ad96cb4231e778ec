// One problem's operands for transformer_bench, and the check a candidate must
// pass on them before it is timed: random A and B in [-1, 1) (never zeros), an
// f64 reference of sampled rows (all rows of small problems), C and a guard
// past it poisoned with NaN before the run; then every element of C written
// and finite, the guard untouched, and the sampled rows within the candidate's
// budget |c - ref| <= abs + rel*sqrt(K)*max|ref| + u(dtype)*|ref|.
// Buffers owns device memory from Prepare to Release; not thread-safe.
// Bench tool: CUDA errors exit on the spot, naming the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "bench/transformer/candidates.h"

namespace arbiter::transformer_bench {

struct Shape {
  int64_t m, n, k;
  DType dtype;
  bool listed;  // from the public transformer list (counted in the geometric mean)
};

// "MxNxK dtype", as every table and check line prints a shape.
std::string ShapeText(const Shape& s);

struct Buffers {
  Shape s;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  int64_t* rows = nullptr;  // sampled rows (device)
  int nrows = 0;
  double* ref = nullptr;    // nrows x n
  double max_ref = 0;

  size_t c_bytes() const { return static_cast<size_t>(s.m * s.n) * 2; }
};

// Allocates buf.s's operands, fills A and B from `seed`, and computes the
// reference of the sampled rows.
void Prepare(Buffers& buf, uint64_t seed, gc::Checker& checker, cudaStream_t st);
void Release(Buffers& buf);

struct Verdict {
  bool ok = false;
  double headroom = 0;  // budget rel / measured rel
  std::string why;
};

// Poisons C and its guard, runs, checks; C keeps the candidate's output.
Verdict Check(const Candidate& cand, const Buffers& buf, const Op& op, gc::Checker& checker,
              cudaStream_t st);

}  // namespace arbiter::transformer_bench
