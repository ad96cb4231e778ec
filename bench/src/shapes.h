// The shapes a bench run measures: the kernel grid (issue 13's, or the same
// structure scaled down for the CPU backend and the CI smoke) and a user's shape
// list ("M N K dtype" per line, '#' comments), with the list's content hash so a
// result names exactly what it measured.
#pragma once

#include <string>
#include <vector>

#include "engine/problem.h"
#include "engine/status.h"

namespace arbiter::bench {

struct BenchShape {
  Problem problem;
  std::string group;  // "square", "skinny", "large_k", "ragged", "tall_wide", or "list"
};

// "full": squares 256..8192; skinny M in {1,8,16,64,128} x N,K in {4096,8192,14336};
// large K to 65536 with small M*N; ragged 4095^3, 2047^3, 777x333x2049, N = 30522 and
// 32001; tall and wide. "small": the same structure at dims about 8x smaller (the CPU
// backend). "tiny": a handful of small shapes (the CI smoke). Sorted by FLOPs, so a
// run cut short by its time budget drops the largest. INVALID_ARGUMENT for another name.
absl::StatusOr<std::vector<BenchShape>> KernelGrid(const std::string& name, DType dtype);

struct ShapeList {
  std::vector<BenchShape> shapes;
  std::string hash;  // FNV-1a 64 of the file's bytes, 16 hex digits
};

// Reads "M N K dtype" lines; INVALID_ARGUMENT naming the line that is not one.
absl::StatusOr<ShapeList> ReadShapeList(const std::string& path);

// The shape at the low end, middle and high end of `d`'s bucket dimension class
// (same power-of-two range and alignment class), distinct and sorted.
std::vector<int64_t> BucketEnds(int64_t d);

}  // namespace arbiter::bench
