#include "bench/src/table.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace arbiter::bench {
namespace {

std::string CsvCell(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

size_t Table::Index(const std::string& name) const {
  return static_cast<size_t>(std::find(columns_.begin(), columns_.end(), name) - columns_.begin());
}

void Table::Add(std::vector<std::string> row) {
  if (row.size() != columns_.size()) {
    throw std::logic_error(absl::StrCat("table row has ", row.size(), " cells, want ",
                                        columns_.size()));
  }
  rows_.push_back(std::move(row));
}

absl::Status Table::WriteCsv(const std::string& path) const {
  std::ofstream out(path);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  auto line = [&](const std::vector<std::string>& cells) {
    std::vector<std::string> quoted;
    for (const auto& c : cells) quoted.push_back(CsvCell(c));
    out << absl::StrJoin(quoted, ",") << "\n";
  };
  line(columns_);
  for (const auto& r : rows_) line(r);
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

std::string Table::Markdown(const std::vector<std::string>& columns) const {
  std::vector<size_t> idx;
  const std::vector<std::string>& wanted = columns.empty() ? columns_ : columns;
  for (const auto& name : wanted) {
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (columns_[i] == name) idx.push_back(i);
    }
  }
  std::string md;
  std::vector<std::string> head, rule;
  for (size_t i : idx) {
    head.push_back(columns_[i]);
    rule.push_back("---");
  }
  absl::StrAppend(&md, "| ", absl::StrJoin(head, " | "), " |\n| ", absl::StrJoin(rule, " | "),
                  " |\n");
  for (const auto& r : rows_) {
    std::vector<std::string> cells;
    for (size_t i : idx) cells.push_back(r[i]);
    absl::StrAppend(&md, "| ", absl::StrJoin(cells, " | "), " |\n");
  }
  return md;
}

std::string Fixed(double value, int digits) {
  if (value < 0) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string Sci(double value) {
  if (value < 0) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3e", value);
  return buf;
}

}  // namespace arbiter::bench
