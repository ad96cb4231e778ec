// The accuracy oracle: compares a candidate's output with the f64-accumulated
// reference over the same stored operands, against the candidate's own budget.
// NaN or Inf anywhere fails (C is poisoned with NaN before every run, so an
// unwritten element can never pass).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/contract.h"
#include "engine/problem.h"

namespace arbiter {

struct OracleReport {
  bool pass = false;
  double max_abs_error = 0;  // max |c - ref|
  double max_rel_error = 0;  // max |c - ref| / max |ref|
  int64_t nonfinite = 0;     // NaN/Inf elements (unwritten ones included)
  int64_t out_of_budget = 0; // finite elements over their tolerance
  std::string detail;        // first failing element, or a summary
};

// `c` holds M*N elements of p.dtype; `ref` M*N doubles.
OracleReport CheckOutput(const Problem& p, const AccuracyBudget& budget, const void* c,
                         const std::vector<double>& ref);

// Elements of `ref` on which no kernel can be judged: non-finite (NaN or Inf in
// the operands, or an f64 product that overflows) or beyond the largest finite
// value of `dtype` (the exact product does not fit C's storage). A correct kernel
// writes NaN or Inf there, so such an output says something about the operands,
// not about the kernel. The daemon's own random operands never have any.
int64_t UnjudgeableElements(DType dtype, const std::vector<double>& ref);

}  // namespace arbiter
