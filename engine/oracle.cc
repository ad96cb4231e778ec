#include "engine/oracle.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

#include "engine/parallel_for.h"

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
      // The bf16 bits are the top half of the float's: inline, not a call an element.
      for (size_t j = 0; j < n; ++j) out[j] = std::bit_cast<float>(static_cast<uint32_t>(x[j]) << 16);
      return;
    }
  }
  for (size_t j = 0; j < n; ++j) out[j] = LoadAsDouble(dtype, c, offset + j);
}

// What one part of a check found, over its packed rows.
struct PartReport {
  double max_abs_error = 0;
  int64_t nonfinite = 0, out_of_budget = 0;
  // The part's first failing element, in row-major order: -1 if none.
  int64_t first_row = -1, first_col = 0;
  double first_value = 0, first_ref = 0, first_error = 0, first_tolerance = 0;
};

// Packed rows [begin, end) of `c` against `ref`.
PartReport CheckPart(const Problem& p, const void* c, const double* ref, double base_tolerance,
                     double roundoff, int64_t begin, int64_t end) {
  PartReport part;
  // C is converted a row at a time (one dtype switch per row, no division per element).
  std::vector<double> values(static_cast<size_t>(p.n));
  for (int64_t packed = begin; packed < end; ++packed) {
    const size_t offset = static_cast<size_t>(packed * p.n);
    LoadRowAsDouble(p.dtype, c, offset, values);
    const double* r = ref + offset;
    for (int64_t col = 0; col < p.n; ++col) {
      const double v = values[static_cast<size_t>(col)];
      if (!std::isfinite(v)) {
        if (part.nonfinite++ == 0 && part.first_row < 0) {
          part.first_row = packed;
          part.first_col = col;
          part.first_value = v;
        }
        continue;
      }
      const double err = std::abs(v - r[col]);
      part.max_abs_error = std::max(part.max_abs_error, err);
      // Per element only |r| varies in the tolerance: the rest is hoisted.
      const double tolerance = base_tolerance + roundoff * std::abs(r[col]);
      if (err > tolerance) {
        if (part.out_of_budget++ == 0 && part.first_row < 0) {
          part.first_row = packed;
          part.first_col = col;
          part.first_value = v;
          part.first_ref = r[col];
          part.first_error = err;
          part.first_tolerance = tolerance;
        }
      }
    }
  }
  return part;
}

// Rows per thread: a part of fewer elements than this costs more in starting a
// thread than it saves (a row of C is converted and compared in ~2-5 ns an element).
constexpr size_t kElementsPerPart = size_t{1} << 16;

// `row_of(r)` is the index in C of packed row r; `rows` packed rows of N elements.
// Large checks split by rows across threads; the parts merged in row order give
// exactly what one pass would (counts, max error, first failing element).
template <typename RowOf>
OracleReport Check(const Problem& p, const AccuracyBudget& budget, const void* c,
                   const std::vector<double>& ref, int64_t rows, RowOf row_of) {
  OracleReport report;
  const size_t count = static_cast<size_t>(rows * p.n);
  if (ref.size() != count) {
    report.detail = "reference has the wrong size";
    return report;
  }
  const size_t rows_per_part = std::max<size_t>(1, kElementsPerPart / std::max<int64_t>(p.n, 1));
  const size_t parts = ParallelParts(static_cast<size_t>(rows), rows_per_part);
  std::vector<double> part_max_ref(parts, 0.0);
  ParallelFor(static_cast<size_t>(rows), rows_per_part, [&](size_t part, size_t begin, size_t end) {
    double m = 0;
    for (size_t i = begin * p.n; i < end * p.n; ++i) m = std::max(m, std::abs(ref[i]));
    part_max_ref[part] = m;
  });
  const double max_abs_ref = *std::max_element(part_max_ref.begin(), part_max_ref.end());

  const double base_tolerance = Tolerance(budget, p.dtype, p.k, max_abs_ref, 0.0);
  const double roundoff = UnitRoundoff(p.dtype);
  std::vector<PartReport> part_reports(parts);
  ParallelFor(static_cast<size_t>(rows), rows_per_part, [&](size_t part, size_t begin, size_t end) {
    part_reports[part] = CheckPart(p, c, ref.data(), base_tolerance, roundoff,
                                   static_cast<int64_t>(begin), static_cast<int64_t>(end));
  });
  const PartReport* first = nullptr;  // the part holding the first failing element
  for (const PartReport& part : part_reports) {
    report.max_abs_error = std::max(report.max_abs_error, part.max_abs_error);
    report.nonfinite += part.nonfinite;
    report.out_of_budget += part.out_of_budget;
    if (first == nullptr && part.first_row >= 0) first = &part;
  }
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
           << " out-of-budget elements of " << count << where << "; first: ";
    detail << "C[" << row_of(first->first_row) << "," << first->first_col << "] = "
           << first->first_value;
    if (!std::isfinite(first->first_value)) {
      detail << " (unwritten or non-finite)";
    } else {
      detail << ", reference " << first->first_ref << ", error " << first->first_error
             << " over tolerance " << first->first_tolerance;
    }
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
