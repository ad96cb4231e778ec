#include "engine/bucket.h"

#include <bit>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace arbiter {

DimClass ClassifyDim(int64_t d) {
  DimClass c;
  const uint64_t u = d < 1 ? 1 : static_cast<uint64_t>(d);
  c.log2_ceil = static_cast<int>(std::bit_width(u - 1));  // 1 -> 0, 2 -> 1, 3..4 -> 2
  c.align = u % 8 == 0 ? 8 : u % 4 == 0 ? 4 : u % 2 == 0 ? 2 : 1;
  return c;
}

Bucket BucketOf(const Problem& p) {
  return Bucket{ClassifyDim(p.m), ClassifyDim(p.n), ClassifyDim(p.k)};
}

BucketKey BucketKeyOf(const Problem& p) { return BucketKey{p.dtype, BucketOf(p)}; }

namespace {

std::string DimText(char name, const DimClass& c) {
  if (c.log2_ceil == 0) return absl::StrCat(std::string(1, name), "[1,1]a", c.align);
  return absl::StrCat(std::string(1, name), "(", int64_t{1} << (c.log2_ceil - 1), ",",
                      int64_t{1} << c.log2_ceil, "]a", c.align);
}

std::optional<DimClass> ParseDim(char name, std::string_view text) {
  if (text.size() < 2 || text[0] != name) return std::nullopt;
  long long lo = 0, hi = 0;
  int align = 0;
  char open = 0, close = 0;
  const std::string s(text.substr(1));
  if (std::sscanf(s.c_str(), "%c%lld,%lld%ca%d", &open, &lo, &hi, &close, &align) != 5) {
    return std::nullopt;
  }
  if (close != ']' || hi < 1 || (hi & (hi - 1)) != 0) return std::nullopt;
  if (align != 1 && align != 2 && align != 4 && align != 8) return std::nullopt;
  DimClass c{static_cast<int>(std::bit_width(static_cast<uint64_t>(hi)) - 1), align};
  const std::string canonical = DimText(name, c);
  if (canonical != text) return std::nullopt;
  return c;
}

}  // namespace

std::string Bucket::ToString() const {
  return absl::StrCat(DimText('m', m), ".", DimText('n', n), ".", DimText('k', k));
}

std::string BucketKey::ToString() const {
  return absl::StrCat(DTypeName(dtype), "/", bucket.ToString());
}

std::optional<Bucket> ParseBucket(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '.');
  if (parts.size() != 3) return std::nullopt;
  auto m = ParseDim('m', parts[0]);
  auto n = ParseDim('n', parts[1]);
  auto k = ParseDim('k', parts[2]);
  if (!m || !n || !k) return std::nullopt;
  return Bucket{*m, *n, *k};
}

std::ostream& operator<<(std::ostream& os, const Bucket& b) { return os << b.ToString(); }

}  // namespace arbiter
