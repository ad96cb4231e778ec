#include "engine/oracle.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace arbiter {

namespace {

// The largest finite value C's storage holds.
double MaxFinite(DType dtype) {
  switch (dtype) {
    case DType::kF32: return std::numeric_limits<float>::max();
    case DType::kF64: return std::numeric_limits<double>::max();
    case DType::kF16: return 65504.0;                  // (2 - 2^-10) * 2^15
    case DType::kBF16: return 3.3895313892515355e38;   // (2 - 2^-7) * 2^127
  }
  return 0;
}

// Elements [offset, offset + out.size()) of `c` as doubles.
void LoadRowAsDouble(DType dtype, const void* c, size_t offset, std::vector<double>& out) {
  const size_t n = out.size();
  switch (dtype) {
    case DType::kF32: {
      const float* x = static_cast<const float*>(c) + offset;
      for (size_t j = 0; j < n; ++j) out[j] = x[j];
      return;
    }
    case DType::kF64: {
      const double* x = static_cast<const double*>(c) + offset;
      for (size_t j = 0; j < n; ++j) out[j] = x[j];
      return;
    }
    case DType::kF16: {
      const uint16_t* x = static_cast<const uint16_t*>(c) + offset;
      for (size_t j = 0; j < n; ++j) out[j] = HalfToFloat(x[j]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* x = static_cast<const uint16_t*>(c) + offset;
      for (size_t j = 0; j < n; ++j) out[j] = BFloat16ToFloat(x[j]);
      return;
    }
  }
  for (size_t j = 0; j < n; ++j) out[j] = LoadAsDouble(dtype, c, offset + j);
}

// `row_of(r)` is the index in C of packed row r; `rows` packed rows of N elements.
template <typename RowOf>
OracleReport Check(const Problem& p, const AccuracyBudget& budget, const void* c,
                   const std::vector<double>& ref, int64_t rows, RowOf row_of) {
  OracleReport report;
  const size_t count = static_cast<size_t>(rows * p.n);
  if (ref.size() != count) {
    report.detail = "reference has the wrong size";
    return report;
  }
  double max_abs_ref = 0;
  for (double r : ref) max_abs_ref = std::max(max_abs_ref, std::abs(r));

  // Per element only |r| varies in the tolerance: the rest is hoisted, and C is
  // converted a row at a time (one dtype switch per row, no division per element).
  const double base_tolerance = Tolerance(budget, p.dtype, p.k, max_abs_ref, 0.0);
  const double roundoff = UnitRoundoff(p.dtype);
  std::vector<double> values(static_cast<size_t>(p.n));
  double max_abs_error = 0;
  int64_t nonfinite = 0, out_of_budget = 0;
  std::ostringstream first;
  for (int64_t packed = 0; packed < rows; ++packed) {
    const size_t offset = static_cast<size_t>(packed * p.n);
    LoadRowAsDouble(p.dtype, c, offset, values);
    const double* r = ref.data() + offset;
    for (int64_t col = 0; col < p.n; ++col) {
      const double v = values[static_cast<size_t>(col)];
      if (!std::isfinite(v)) {
        if (nonfinite++ == 0 && first.tellp() == 0) {
          first << "C[" << row_of(packed) << "," << col << "] = " << v
                << " (unwritten or non-finite)";
        }
        continue;
      }
      const double err = std::abs(v - r[col]);
      max_abs_error = std::max(max_abs_error, err);
      const double tolerance = base_tolerance + roundoff * std::abs(r[col]);
      if (err > tolerance) {
        if (out_of_budget++ == 0 && first.tellp() == 0) {
          first << "C[" << row_of(packed) << "," << col << "] = " << v << ", reference "
                << r[col] << ", error " << err << " over tolerance " << tolerance;
        }
      }
    }
  }
  report.max_abs_error = max_abs_error;
  report.nonfinite = nonfinite;
  report.out_of_budget = out_of_budget;
  report.max_rel_error = max_abs_ref > 0 ? report.max_abs_error / max_abs_ref : report.max_abs_error;
  report.pass = report.nonfinite == 0 && report.out_of_budget == 0;
  std::ostringstream detail;
  const std::string where =
      rows == p.m ? "" : " (" + std::to_string(rows) + " of " + std::to_string(p.m) + " rows checked)";
  if (report.pass) {
    detail << "max abs error " << report.max_abs_error << ", max rel error "
           << report.max_rel_error << " within budget" << where;
  } else {
    detail << report.nonfinite << " non-finite and " << report.out_of_budget
           << " out-of-budget elements of " << count << where << "; first: " << first.str();
  }
  report.detail = detail.str();
  return report;
}

}  // namespace

OracleReport CheckOutput(const Problem& p, const AccuracyBudget& budget, const void* c,
                         const std::vector<double>& ref) {
  return Check(p, budget, c, ref, p.m, [](int64_t r) { return r; });
}

OracleReport CheckRows(const Problem& p, const AccuracyBudget& budget, const void* c,
                       const std::vector<double>& ref, const std::vector<int64_t>& rows) {
  return Check(p, budget, c, ref, static_cast<int64_t>(rows.size()),
               [&](int64_t r) { return rows[static_cast<size_t>(r)]; });
}

std::vector<int64_t> SampledRows(int64_t m, int64_t budget) {
  std::vector<int64_t> rows;
  if (m <= std::max<int64_t>(budget, 4)) {
    for (int64_t i = 0; i < m; ++i) rows.push_back(i);
    return rows;
  }
  auto add = [&](int64_t r) {
    if (r >= 0 && r < m) rows.push_back(r);
  };
  for (int64_t r : {int64_t{0}, int64_t{1}, m - 2, m - 1}) add(r);
  // The last partial tile begins at the last multiple of t below M: its first row
  // and the row before it (the last of the last full tile).
  for (int64_t t = 8; t <= 256; t *= 2) {
    const int64_t edge = (m - 1) / t * t;
    add(edge);
    add(edge - 1);
  }
  const int64_t blocks = std::max<int64_t>(budget, 1);
  const int64_t block = (m + blocks - 1) / blocks;
  for (int64_t b = 0; b < blocks; ++b) {
    // 37 is odd, so successive blocks visit different offsets of a power-of-two tile.
    add(b * block + (b * 37 + 3) % block);
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

int64_t UnjudgeableElements(DType dtype, const std::vector<double>& ref) {
  const double max_finite = MaxFinite(dtype);
  int64_t count = 0;
  for (double r : ref) {
    if (!(std::abs(r) <= max_finite)) ++count;  // NaN compares false: counted
  }
  return count;
}

}  // namespace arbiter
