#include "engine/registry.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace arbiter {

absl::StatusOr<std::unique_ptr<Registry>> Registry::Create(std::vector<CandidateSpec> candidates,
                                                           const Backend& backend) {
  std::vector<RegisteredCandidate> registered;
  std::set<std::string> names;
  for (CandidateSpec& spec : candidates) {
    RETURN_IF_ERROR(ValidateCandidate(spec));
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("candidate \"", spec.name, "\": name registered twice"));
    }
    RegisteredCandidate rc;
    // Family members agree on arch (checked above), so the first member speaks for all.
    rc.device_reason = backend.ArchitectureGap(spec.members.front().contract.arch);
    rc.device_ok = rc.device_reason.empty();
    rc.spec = std::move(spec);
    registered.push_back(std::move(rc));
  }
  return std::unique_ptr<Registry>(new Registry(std::move(registered)));
}

const RegisteredCandidate* Registry::Find(const std::string& name) const {
  for (const RegisteredCandidate& c : candidates_) {
    if (c.spec.name == name) return &c;
  }
  return nullptr;
}

std::string Registry::CoverageGap(const RegisteredCandidate& c, const Problem& p) const {
  if (!c.device_ok) return c.device_reason;
  const CandidateMember* member = c.spec.Member(p.dtype);
  if (member == nullptr) return absl::StrCat("no ", DTypeName(p.dtype), " entry point");
  return arbiter::CoverageGap(member->contract.shape, p);
}

}  // namespace arbiter
