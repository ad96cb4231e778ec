#include "client/matmul_check.h"

#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "client/dtype_codec.h"

namespace arbiter::client {

Operands RandomOperands(const v1::Problem& p, uint64_t seed) {
  const size_t elem = ElementBytes(p.dtype());
  Operands ops;
  ops.a.resize(static_cast<size_t>(p.m() * p.k()) * elem);
  ops.b.resize(static_cast<size_t>(p.k() * p.n()) * elem);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (size_t i = 0; i < static_cast<size_t>(p.m() * p.k()); ++i) {
    StoreElement(p.dtype(), ops.a.data(), i, 0.5 * normal(rng));
  }
  for (size_t i = 0; i < static_cast<size_t>(p.k() * p.n()); ++i) {
    StoreElement(p.dtype(), ops.b.data(), i, 0.5 * normal(rng));
  }
  return ops;
}

v1::AccuracyBudget DefaultBudget(v1::DType dtype) {
  const double u = dtype == v1::DTYPE_F64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  v1::AccuracyBudget budget;
  budget.set_abs(16 * u);
  budget.set_rel_per_sqrt_k(16 * u);
  return budget;
}

CheckResult CheckMatmul(const v1::Problem& p, const Operands& ops, const std::string& c,
                        const v1::AccuracyBudget& budget, const CheckOptions& options) {
  CheckResult result;
  const v1::DType dtype = p.dtype();
  const int64_t m = p.m(), n = p.n(), k = p.k();
  if (c.size() != static_cast<size_t>(m * n) * ElementBytes(dtype)) {
    std::ostringstream why;
    why << "C has " << c.size() << " bytes, expected " << m * n * ElementBytes(dtype);
    result.checked = m * n;
    result.failures = m * n;
    result.worst_ratio = INFINITY;
    result.first_failure = why.str();
    return result;
  }

  // Which elements: all of them, or a seeded sample.
  std::vector<std::pair<int64_t, int64_t>> cells;
  if (options.samples <= 0 || options.samples >= m * n) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) cells.emplace_back(i, j);
  } else {
    std::mt19937_64 rng(options.seed);
    std::uniform_int_distribution<int64_t> row(0, m - 1), col(0, n - 1);
    for (int s = 0; s < options.samples; ++s) cells.emplace_back(row(rng), col(rng));
  }

  std::vector<double> refs(cells.size());
  double max_ref = 0;
  for (size_t s = 0; s < cells.size(); ++s) {
    const auto [i, j] = cells[s];
    double acc = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      acc += LoadElement(dtype, ops.a.data(), i * k + kk) *
             LoadElement(dtype, ops.b.data(), kk * n + j);
    }
    refs[s] = acc;
    max_ref = std::max(max_ref, std::abs(acc));
  }

  const double u = StorageRoundoff(dtype);
  const double scale = budget.rel_per_sqrt_k() * std::sqrt(static_cast<double>(k)) * max_ref;
  for (size_t s = 0; s < cells.size(); ++s) {
    const auto [i, j] = cells[s];
    const double got = LoadElement(dtype, c.data(), i * n + j);
    const double err = std::abs(got - refs[s]);
    const double tolerance = budget.abs() + scale + u * std::abs(refs[s]);
    ++result.checked;
    // NaN compares false everywhere: `!(err <= tolerance)` catches it.
    const bool ok = err <= tolerance;
    if (std::isfinite(err)) result.max_abs_error = std::max(result.max_abs_error, err);
    const double ratio = std::isfinite(err) ? err / tolerance : INFINITY;
    result.worst_ratio = std::max(result.worst_ratio, ratio);
    if (!ok) {
      if (result.failures == 0) {
        std::ostringstream why;
        why.precision(9);
        why << "C[" << i << "," << j << "] = " << got << ", reference " << refs[s]
            << ", tolerance " << tolerance;
        result.first_failure = why.str();
      }
      ++result.failures;
    }
  }
  return result;
}

}  // namespace arbiter::client
