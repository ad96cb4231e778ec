// Shape buckets: the unit a verdict covers. Each dim maps to its power-of-two
// range (2^(i-1), 2^i] and its alignment class (largest of 8, 4, 2, 1 dividing
// it). Alignment is its own axis because kernels fall off cliffs on it: on an
// H200 cuBLAS runs 4095^3 bf16 ~6x slower than 4096^3 (a leading dim that is not
// a multiple of 8 selects an old align1 kernel).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "engine/problem.h"

namespace arbiter {

struct DimClass {
  int log2_ceil = 0;  // d in (2^(log2_ceil-1), 2^log2_ceil]; 0 for d == 1
  int align = 1;      // 8, 4, 2 or 1
  bool operator==(const DimClass&) const = default;
  auto operator<=>(const DimClass&) const = default;
};

struct Bucket {
  DimClass m, n, k;
  bool operator==(const Bucket&) const = default;
  auto operator<=>(const Bucket&) const = default;
  // "m(512,1024]a8.n(2048,4096]a1.k[1,1]a1": readable, stable, the store key.
  std::string ToString() const;
};

// A bucket of one dtype: on one device, the key of a verdict, a force, a
// measurement in flight and the narrowest quarantine scope.
struct BucketKey {
  DType dtype = DType::kF32;
  Bucket bucket;
  bool operator==(const BucketKey&) const = default;
  auto operator<=>(const BucketKey&) const = default;
  std::string ToString() const;  // "f32/m(16,32]a8.n(32,64]a8.k(32,64]a8"
};

DimClass ClassifyDim(int64_t d);
Bucket BucketOf(const Problem& p);
BucketKey BucketKeyOf(const Problem& p);
std::optional<Bucket> ParseBucket(const std::string& text);
std::ostream& operator<<(std::ostream& os, const Bucket& b);

}  // namespace arbiter
