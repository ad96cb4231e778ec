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

// The same check over the listed rows of C only: `c` holds rows.size() x N
// elements of p.dtype and `ref` the same rows of the reference, both packed in
// the order of `rows`. max|ref| is taken over these rows, which can only tighten
// the tolerance. Messages name the rows by their index in C.
OracleReport CheckRows(const Problem& p, const AccuracyBudget& budget, const void* c,
                       const std::vector<double>& ref, const std::vector<int64_t>& rows);

// The rows of an M-row C that a sampled check reads when M > `budget` (all rows
// otherwise): the first and last two; both sides of the edge where a partial
// row tile would begin, for tiles of 8 to 256 rows; and one row in each of
// `budget` equal blocks, at an offset that moves from block to block, so that
// no single offset within a tile is the only one ever seen. Sorted, distinct.
std::vector<int64_t> SampledRows(int64_t m, int64_t budget);

// Elements of `ref` on which no kernel can be judged: non-finite (NaN or Inf in
// the operands, or an f64 product that overflows) or beyond the largest finite
// value of `dtype` (the exact product does not fit C's storage). A correct kernel
// writes NaN or Inf there, so such an output says something about the operands,
// not about the kernel. The daemon's own random operands never have any.
int64_t UnjudgeableElements(DType dtype, const std::vector<double>& ref);

}  // namespace arbiter
