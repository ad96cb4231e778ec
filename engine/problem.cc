#include "engine/problem.h"

#include <sstream>

#include "absl/strings/str_cat.h"

namespace arbiter {

std::string Problem::ToString() const {
  return absl::StrCat(DTypeName(dtype), " ", m, "x", n, "x", k);
}

std::ostream& operator<<(std::ostream& os, const Problem& p) { return os << p.ToString(); }

absl::Status ValidateProblem(const Problem& p, const ProblemLimits& limits) {
  if (ElementSize(p.dtype) == 0) {
    return absl::InvalidArgumentError("dtype: expected one of f32, f64, f16, bf16");
  }
  const std::pair<const char*, int64_t> dims[] = {{"m", p.m}, {"n", p.n}, {"k", p.k}};
  for (const auto& [name, value] : dims) {
    if (value <= 0 || value > limits.max_dim) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": expected 1..", limits.max_dim,
                                                     ", got ", value));
    }
  }
  const std::pair<const char*, double> sizes[] = {
      {"a (m*k)", static_cast<double>(p.m) * p.k * ElementSize(p.dtype)},
      {"b (k*n)", static_cast<double>(p.k) * p.n * ElementSize(p.dtype)},
      {"c (m*n)", static_cast<double>(p.m) * p.n * ElementSize(p.dtype)}};
  for (const auto& [name, bytes] : sizes) {
    if (bytes > static_cast<double>(limits.max_operand_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": expected at most ", limits.max_operand_bytes, " bytes, the problem ",
          p.ToString(), " needs ", static_cast<int64_t>(bytes)));
    }
  }
  return absl::OkStatus();
}

}  // namespace arbiter
