#include "engine/problem.h"

#include <sstream>

#include "absl/strings/str_cat.h"

namespace arbiter {

std::string Problem::ToString() const {
  return absl::StrCat(DTypeName(dtype), " ", m, "x", n, "x", k);
}

std::ostream& operator<<(std::ostream& os, const Problem& p) { return os << p.ToString(); }

std::optional<int64_t> OperandBytes(int64_t rows, int64_t cols, DType dtype) {
  int64_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(rows, cols, &elements)) return std::nullopt;
  if (__builtin_mul_overflow(elements, static_cast<int64_t>(ElementSize(dtype)), &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

absl::Status ValidateProblem(const Problem& p, const ProblemLimits& limits) {
  if (ElementSize(p.dtype) == 0) {
    return absl::InvalidArgumentError("dtype: expected one of f32, f64, f16, bf16");
  }
  const std::pair<const char*, int64_t> dims[] = {{"m", p.m}, {"n", p.n}, {"k", p.k}};
  for (const auto& [name, value] : dims) {
    if (value <= 0) return absl::InvalidArgumentError(absl::StrCat(name, ": expected >= 1, got ", value));
  }
  struct Operand {
    const char* name;  // "a (m*k)"
    int64_t rows, cols;
  };
  const Operand operands[] = {{"a (m*k)", p.m, p.k}, {"b (k*n)", p.k, p.n}, {"c (m*n)", p.m, p.n}};
  int64_t total = 0;
  for (const Operand& o : operands) {
    const std::optional<int64_t> bytes = OperandBytes(o.rows, o.cols, p.dtype);
    if (!bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          o.name, ": ", o.rows, "*", o.cols, " elements of ", DTypeName(p.dtype),
          " overflow 64-bit byte arithmetic (", p.ToString(), ")"));
    }
    if (*bytes > limits.max_operand_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          o.name, ": ", *bytes, " bytes for ", p.ToString(), " exceeds the operand limit of ",
          limits.max_operand_bytes, " bytes"));
    }
    if (__builtin_add_overflow(total, *bytes, &total)) total = INT64_MAX;
  }
  if (limits.max_device_bytes > 0 && total > limits.max_device_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a, b and c: ", total, " bytes for ", p.ToString(), " exceed the device memory limit of ",
        limits.max_device_bytes, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace arbiter
