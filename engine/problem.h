// A matmul problem: C[M,N] = A[M,K] * B[K,N], all row-major, one dtype.
// f16 and bf16 are computed with f32 accumulation; C is in the input dtype.
#pragma once

#include <cstdint>
#include <optional>
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

// Limits every request is checked against before any allocation. A dimension
// has no cap of its own: it is bounded by the bytes its operands take.
struct ProblemLimits {
  // Largest A, B or C in bytes. 2 GiB keeps every operand's element count
  // below 2^31 (kernels may index elements with 32-bit offsets).
  int64_t max_operand_bytes = int64_t{1} << 31;
  // A, B and C together: what a measurement or an inline dispatch allocates on
  // the device. 0: no limit (the Arbiter sets it to the device's memory).
  int64_t max_device_bytes = 0;
};

// Bytes of a rows x cols operand of `dtype`, or nullopt when the count
// overflows 64-bit arithmetic.
std::optional<int64_t> OperandBytes(int64_t rows, int64_t cols, DType dtype);

// INVALID_ARGUMENT for a dimension < 1, a byte count that overflows, or a
// problem beyond `limits` (naming the limit, the operand and its bytes: the
// request itself is too large, so retrying it cannot help); else OK. Checked
// before any arithmetic that could overflow.
absl::Status ValidateProblem(const Problem& p, const ProblemLimits& limits);

}  // namespace arbiter
