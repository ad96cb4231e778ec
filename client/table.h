// Aligned text tables for arbiterctl: columns as wide as their widest cell,
// separated by two spaces, a header row and a rule under it.
//
// Not thread-safe.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace arbiter::client {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  // Missing trailing cells print empty; extra cells are kept.
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  // Every line starts with `indent` spaces.
  void Print(std::ostream& os, int indent = 0) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace arbiter::client
