#include "engine/contract.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace arbiter {

const char* DeterminismName(Determinism d) {
  switch (d) {
    case Determinism::kNondeterministic: return "nondeterministic";
    case Determinism::kRunToRun: return "run_to_run";
    case Determinism::kBatchInvariant: return "batch_invariant";
  }
  return "unknown";
}

std::optional<Determinism> ParseDeterminism(std::string_view name) {
  for (Determinism d : {Determinism::kNondeterministic, Determinism::kRunToRun,
                        Determinism::kBatchInvariant}) {
    if (DeterminismName(d) == name) return d;
  }
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, Determinism d) { return os << DeterminismName(d); }

std::ostream& operator<<(std::ostream& os, const MemberContract& c) {
  os << c.dtype << " via " << (c.entry.empty() ? "?" : c.entry) << " [abs " << c.accuracy.abs
     << ", rel " << c.accuracy.rel << "/sqrt(K), " << c.determinism << ", " << c.arch;
  const ShapeCoverage& s = c.shape;
  if (s.align_m > 1 || s.align_n > 1 || s.align_k > 1) {
    os << ", align " << s.align_m << "/" << s.align_n << "/" << s.align_k;
  }
  if (s.max_m != INT64_MAX) os << ", M<=" << s.max_m;
  if (s.max_n != INT64_MAX) os << ", N<=" << s.max_n;
  if (s.max_k != INT64_MAX) os << ", K<=" << s.max_k;
  if (c.tile.known()) os << ", tile " << TileName(c.tile);
  return os << "]";
}

namespace {

absl::Status CheckBound(const char* field, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": expected a finite bound > 0, got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckRange(const char* dim, int64_t lo, int64_t hi, int64_t align) {
  if (lo < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shape.min_", dim, ": expected >= 1, got ", lo));
  }
  if (hi < lo) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape.max_", dim, ": expected >= min_", dim, " (", lo, "), got ", hi));
  }
  if (align < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape.align_", dim, ": expected >= 1, got ", align));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateMemberContract(const MemberContract& c) {
  if (ElementSize(c.dtype) == 0) return absl::InvalidArgumentError("dtype: unknown");
  RETURN_IF_ERROR(CheckBound("accuracy.abs", c.accuracy.abs));
  RETURN_IF_ERROR(CheckBound("accuracy.rel", c.accuracy.rel));
  if (c.arch.empty()) {
    return absl::InvalidArgumentError("arch: expected an architecture claim (\"cpu\", \"sm_80+\", ...), got none");
  }
  if (ParseDeterminism(DeterminismName(c.determinism)) != c.determinism) {
    return absl::InvalidArgumentError("determinism: unknown level");
  }
  const ShapeCoverage& s = c.shape;
  RETURN_IF_ERROR(CheckRange("m", s.min_m, s.max_m, s.align_m));
  RETURN_IF_ERROR(CheckRange("n", s.min_n, s.max_n, s.align_n));
  RETURN_IF_ERROR(CheckRange("k", s.min_k, s.max_k, s.align_k));
  const OutputTile& t = c.tile;
  if (t.rows < 0 || (t.known() && (t.cols < 1 || t.max_split_k < 1 || t.ctas_per_sm < 1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tile: expected rows 0 (unknown) or rows, cols, max_split_k and ctas_per_sm >= 1, got ",
        t.rows, "x", t.cols, ", split ", t.max_split_k, ", ", t.ctas_per_sm, " per SM"));
  }
  return absl::OkStatus();
}

std::string TileName(const OutputTile& t) {
  if (!t.known()) return t.per_shape ? "chosen per shape" : "unknown";
  std::string name = absl::StrCat(t.rows, "x", t.cols);
  if (t.max_split_k > 1) absl::StrAppend(&name, "/k", t.max_split_k);
  return name;
}

double TileEfficiency(const OutputTile& t, const Problem& p, int multiprocessors) {
  if (!t.known() || p.m < 1 || p.n < 1) return 1;
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t tiles_m = ceil_div(p.m, t.rows), tiles_n = ceil_div(p.n, t.cols);
  const double padded_m = static_cast<double>(tiles_m * t.rows);
  const double padded_n = static_cast<double>(tiles_n * t.cols);
  const double fill = static_cast<double>(p.m) * static_cast<double>(p.n) / (padded_m * padded_n);
  if (multiprocessors < 1) return fill;
  const int64_t slots = int64_t{multiprocessors} * t.ctas_per_sm;
  const int64_t tiles = tiles_m * tiles_n;
  const int64_t splits = std::clamp<int64_t>(ceil_div(slots, tiles), 1, t.max_split_k);
  const int64_t ctas = tiles * splits;
  const int64_t waves = ceil_div(ctas, slots);
  return fill * static_cast<double>(ctas) / static_cast<double>(waves * slots);
}

std::string CoverageGap(const ShapeCoverage& s, const Problem& p) {
  struct Dim {
    const char* name;
    int64_t value, lo, hi, align;
  };
  for (const Dim& d : {Dim{"M", p.m, s.min_m, s.max_m, s.align_m},
                       Dim{"N", p.n, s.min_n, s.max_n, s.align_n},
                       Dim{"K", p.k, s.min_k, s.max_k, s.align_k}}) {
    if (d.value < d.lo) return absl::StrCat(d.name, "=", d.value, " is below its minimum ", d.lo);
    if (d.value > d.hi) return absl::StrCat(d.name, "=", d.value, " is above its maximum ", d.hi);
    if (d.value % d.align != 0) {
      return absl::StrCat(d.name, "=", d.value, " is not a multiple of ", d.align);
    }
  }
  return "";
}

double Tolerance(const AccuracyBudget& budget, DType dtype, int64_t k, double max_abs_ref,
                 double abs_ref) {
  return budget.abs + budget.rel * std::sqrt(static_cast<double>(k)) * max_abs_ref +
         UnitRoundoff(dtype) * abs_ref;
}

}  // namespace arbiter
