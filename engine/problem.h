// A matmul problem: C[M,N] = A[M,K] * B[K,N], all row-major, one dtype.
// f16 and bf16 are computed with f32 accumulation; C is in the input dtype.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "engine/dtype.h"
#include "engine/status.h"

namespace arbiter {

struct Problem {
  DType dtype = DType::kF32;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;

  size_t a_bytes() const { return static_cast<size_t>(m * k) * ElementSize(dtype); }
  size_t b_bytes() const { return static_cast<size_t>(k * n) * ElementSize(dtype); }
  size_t c_bytes() const { return static_cast<size_t>(m * n) * ElementSize(dtype); }
  double flops() const { return 2.0 * m * n * k; }
  std::string ToString() const;  // "bf16 4096x4096x4096"
  bool operator==(const Problem&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Problem& p);

// Limits every request is checked against before any allocation.
struct ProblemLimits {
  int64_t max_dim = 65536;                  // largest M, N or K accepted
  int64_t max_operand_bytes = 1ll << 31;    // largest A, B or C in bytes
};

// INVALID_ARGUMENT naming the expected and received values, or OK.
absl::Status ValidateProblem(const Problem& p, const ProblemLimits& limits);

}  // namespace arbiter
