#include "engine/oracle.h"

#include <cmath>
#include <sstream>

namespace arbiter {

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

}  // namespace arbiter
