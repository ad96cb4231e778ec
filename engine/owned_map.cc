#include "engine/owned_map.h"

#include <cinttypes>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace arbiter {

std::string RandomId(char prefix, std::mt19937_64& rng) {
  char text[18];
  std::snprintf(text, sizeof text, "%c%016" PRIx64, prefix, static_cast<uint64_t>(rng()));
  return text;
}

absl::Status CheckLabel(const std::string& label) {
  constexpr size_t kMaxLabelBytes = 128;
  if (label.size() <= kMaxLabelBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("label: expected at most ", kMaxLabelBytes, " bytes, got ", label.size()));
}

}  // namespace arbiter
