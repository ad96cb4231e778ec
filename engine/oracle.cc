#include "engine/oracle.h"

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

}  // namespace

OracleReport CheckOutput(const Problem& p, const AccuracyBudget& budget, const void* c,
                         const std::vector<double>& ref) {
  OracleReport report;
  const size_t count = static_cast<size_t>(p.m * p.n);
  if (ref.size() != count) {
    report.detail = "reference has the wrong size";
    return report;
  }
  double max_abs_ref = 0;
  for (double r : ref) max_abs_ref = std::max(max_abs_ref, std::abs(r));

  std::ostringstream first;
  for (size_t i = 0; i < count; ++i) {
    const double v = LoadAsDouble(p.dtype, c, i);
    const double r = ref[i];
    if (!std::isfinite(v)) {
      if (report.nonfinite++ == 0 && first.tellp() == 0) {
        first << "C[" << i / p.n << "," << i % p.n << "] = " << v << " (unwritten or non-finite)";
      }
      continue;
    }
    const double err = std::abs(v - r);
    report.max_abs_error = std::max(report.max_abs_error, err);
    if (err > Tolerance(budget, p.dtype, p.k, max_abs_ref, std::abs(r))) {
      if (report.out_of_budget++ == 0 && first.tellp() == 0) {
        first << "C[" << i / p.n << "," << i % p.n << "] = " << v << ", reference " << r
              << ", error " << err << " over tolerance "
              << Tolerance(budget, p.dtype, p.k, max_abs_ref, std::abs(r));
      }
    }
  }
  report.max_rel_error = max_abs_ref > 0 ? report.max_abs_error / max_abs_ref : report.max_abs_error;
  report.pass = report.nonfinite == 0 && report.out_of_budget == 0;
  std::ostringstream detail;
  if (report.pass) {
    detail << "max abs error " << report.max_abs_error << ", max rel error "
           << report.max_rel_error << " within budget";
  } else {
    detail << report.nonfinite << " non-finite and " << report.out_of_budget
           << " out-of-budget elements of " << count << "; first: " << first.str();
  }
  report.detail = detail.str();
  return report;
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
