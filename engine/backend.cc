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

const char* RegionKindName(RegionKind kind) {
  switch (kind) {
    case RegionKind::kHostMemfd: return "host_memfd";
    case RegionKind::kCudaVmmFd: return "cuda_vmm_fd";
    case RegionKind::kCudaIpc: return "cuda_ipc";
  }
  return "unknown";
}

}  // namespace arbiter
