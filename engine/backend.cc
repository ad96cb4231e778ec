#include "engine/backend.h"

#include "absl/strings/str_cat.h"

namespace arbiter {

std::string DeviceInfo::Fingerprint() const {
  // Everything that can change a measurement; the UUID is left out on purpose so
  // identical devices share verdicts (one daemon per GPU, same model and stack).
  std::string out = absl::StrCat(backend, "|", name, "|", arch, "|cc", compute_capability, "|mp",
                                 multiprocessors);
  for (const auto& [library, version] : versions) absl::StrAppend(&out, "|", library, "=", version);
  return out;
}

}  // namespace arbiter
