// Client-side operands and result checks for Matmul: random operands (N(0,1)
// scaled by 0.5, rounded to the dtype - never zeros) and a check of C against
// an f64-accumulated reference computed from the same stored operands, on a
// sample of elements or all of them.
//
// The per-element tolerance is the candidate's declared accuracy budget (as
// ListCandidates reports it), the same form the daemon's oracle uses:
//   |c - ref| <= abs + rel_per_sqrt_k * sqrt(K) * max|ref| + u(dtype) * |ref|
// with max|ref| taken over the checked elements.
//
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "arbiter/v1/arbiter.pb.h"

namespace arbiter::client {

struct Operands {
  std::string a;  // m*k elements of the dtype, row-major, as sent on the wire
  std::string b;  // k*n elements
};

// N(0,1)*0.5 rounded to the problem's dtype, from `seed`.
Operands RandomOperands(const v1::Problem& p, uint64_t seed);

// A budget for when the candidate's own is unknown: a few units of f32
// accumulation roundoff (f64 roundoff for f64) per sqrt(K).
v1::AccuracyBudget DefaultBudget(v1::DType dtype);

struct CheckOptions {
  int samples = 64;    // elements checked; <= 0 or >= m*n checks every element
  uint64_t seed = 1;   // which elements are sampled
};

struct CheckResult {
  int64_t checked = 0;
  int64_t failures = 0;        // elements outside the budget (NaN and Inf included)
  double max_abs_error = 0;
  double worst_ratio = 0;      // max over elements of |c - ref| / tolerance; <= 1 passes
  std::string first_failure;   // "C[3,7] = 1.5, reference 1.25, tolerance 1e-05"
  bool passed() const { return checked > 0 && failures == 0; }
};

// Checks `c` (m*n elements as received) against the reference from `ops`.
// A `c` of the wrong size fails with every element counted.
CheckResult CheckMatmul(const v1::Problem& p, const Operands& ops, const std::string& c,
                        const v1::AccuracyBudget& budget, const CheckOptions& options);

}  // namespace arbiter::client
