// A results table kept in memory and written twice: as CSV (for the plot script
// and anyone's spreadsheet) and as a Markdown table (for the results page).
// Cells are text, formatted by the caller, so both files show the same digits.
//
// Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "engine/status.h"

namespace arbiter::bench {

class Table {
 public:
  explicit Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}

  // One row; must have one cell per column.
  void Add(std::vector<std::string> row);

  const std::vector<std::string>& columns() const { return columns_; }
  // The position of the column `name`; columns().size() when there is none.
  size_t Index(const std::string& name) const;
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }

  // CSV with a header line; cells holding a comma or quote are quoted.
  absl::Status WriteCsv(const std::string& path) const;
  // A Markdown table of `columns` (all when empty).
  std::string Markdown(const std::vector<std::string>& columns = {}) const;

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Fixed-point with `digits` after the point; "" for a negative value (not measured).
std::string Fixed(double value, int digits);
// Three significant digits in scientific form ("1.23e-04"); "" for a negative value.
std::string Sci(double value);

}  // namespace arbiter::bench
