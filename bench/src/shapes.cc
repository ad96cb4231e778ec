#include "bench/src/shapes.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/bucket.h"

namespace arbiter::bench {
namespace {

void Add(std::vector<BenchShape>* out, const char* group, DType dtype, int64_t m, int64_t n,
         int64_t k) {
  out->push_back({Problem{dtype, m, n, k}, group});
}

void Grid(std::vector<BenchShape>* out, DType dtype, int64_t div) {
  auto d = [div](int64_t v) { return std::max<int64_t>(1, v / div); };
  for (int64_t s = 256; s <= 8192; s *= 2) Add(out, "square", dtype, d(s), d(s), d(s));
  for (int64_t m : {1, 8, 16, 64, 128}) {
    for (int64_t n : {4096, 8192, 14336}) {
      for (int64_t k : {4096, 8192, 14336}) Add(out, "skinny", dtype, m, d(n), d(k));
    }
  }
  for (int64_t k : {16384, 32768, 65536}) {
    Add(out, "large_k", dtype, 16, 16, d(k));
    Add(out, "large_k", dtype, 64, 64, d(k));
  }
  Add(out, "large_k", dtype, 128, 128, d(65536));
  // Ragged: dims that are not multiples of 8 (alignment cliffs) and vocabulary widths.
  Add(out, "ragged", dtype, d(4096) - 1, d(4096) - 1, d(4096) - 1);
  Add(out, "ragged", dtype, d(2048) - 1, d(2048) - 1, d(2048) - 1);
  Add(out, "ragged", dtype, std::max<int64_t>(1, 777 / div), std::max<int64_t>(1, 333 / div),
      d(2049) | 1);
  Add(out, "ragged", dtype, d(512), div == 1 ? 30522 : 30522 / div + 1, d(4096));
  Add(out, "ragged", dtype, d(512), div == 1 ? 32001 : 32001 / div, d(4096));
  Add(out, "tall_wide", dtype, d(65536), d(256), d(1024));
  Add(out, "tall_wide", dtype, d(256), d(65536), d(1024));
  Add(out, "tall_wide", dtype, d(16384), d(1024), d(1024));
  Add(out, "tall_wide", dtype, d(1024), d(16384), d(1024));
}

}  // namespace

absl::StatusOr<std::vector<BenchShape>> KernelGrid(const std::string& name, DType dtype) {
  std::vector<BenchShape> out;
  if (name == "full") {
    Grid(&out, dtype, 1);
  } else if (name == "small") {
    Grid(&out, dtype, 8);
  } else if (name == "tiny") {
    Add(&out, "square", dtype, 32, 32, 32);
    Add(&out, "square", dtype, 64, 64, 64);
    Add(&out, "skinny", dtype, 1, 64, 64);
    Add(&out, "skinny", dtype, 8, 64, 64);
    Add(&out, "ragged", dtype, 33, 17, 65);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("grid: expected full, small or tiny, got \"", name, "\""));
  }
  // Drop duplicates the scaling may make, then order by work.
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  std::vector<BenchShape> unique;
  for (auto& s : out) {
    if (seen.insert({s.problem.m, s.problem.n, s.problem.k}).second) unique.push_back(s);
  }
  std::stable_sort(unique.begin(), unique.end(), [](const BenchShape& a, const BenchShape& b) {
    return a.problem.flops() < b.problem.flops();
  });
  return unique;
}

absl::StatusOr<ShapeList> ReadShapeList(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("shape list ", path, ": cannot open"));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  ShapeList list;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  list.hash = hex;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    int64_t m, n, k;
    std::string dtype_name, extra;
    if (!(fields >> m)) continue;  // blank or comment
    if (!(fields >> n >> k >> dtype_name) || (fields >> extra)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": expected \"M N K dtype\", got \"", line, "\""));
    }
    const std::optional<DType> dtype = ParseDType(dtype_name);
    if (!dtype || m <= 0 || n <= 0 || k <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", number, ": expected positive M N K and f32|f64|f16|bf16, got \"", line, "\""));
    }
    list.shapes.push_back({Problem{*dtype, m, n, k}, "list"});
  }
  return list;
}

std::vector<int64_t> BucketEnds(int64_t d) {
  const DimClass cls = ClassifyDim(d);
  const int64_t hi_bound = int64_t{1} << cls.log2_ceil;
  const int64_t lo_bound = cls.log2_ceil == 0 ? 1 : hi_bound / 2 + 1;
  std::vector<int64_t> members;
  auto first_from = [&](int64_t from, int step) -> int64_t {
    for (int64_t x = from; x >= lo_bound && x <= hi_bound; x += step) {
      if (ClassifyDim(x) == cls) return x;
    }
    return -1;
  };
  const int64_t lo = first_from(lo_bound, 1);
  const int64_t hi = first_from(hi_bound, -1);
  const int64_t mid = first_from((lo + hi) / 2, 1);
  std::set<int64_t> distinct;
  for (int64_t x : {lo, mid, hi}) {
    if (x > 0) distinct.insert(x);
  }
  return {distinct.begin(), distinct.end()};
}

}  // namespace arbiter::bench
