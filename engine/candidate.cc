#include "engine/candidate.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace arbiter {

const CandidateMember* CandidateSpec::Member(DType dtype) const {
  for (const CandidateMember& m : members) {
    if (m.contract.dtype == dtype) return &m;
  }
  return nullptr;
}

namespace {

absl::Status Refuse(const CandidateSpec& spec, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("candidate \"", spec.name, "\": ", what));
}

}  // namespace

absl::Status ValidateCandidate(const CandidateSpec& spec) {
  if (spec.name.empty()) return absl::InvalidArgumentError("candidate name: expected non-empty");
  for (char ch : spec.name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    if (!ok) return Refuse(spec, "name: expected [a-z0-9_-] only (it is a stable key)");
  }
  if (spec.version < 1) return Refuse(spec, absl::StrCat("version: expected >= 1, got ", spec.version));
  if (spec.tier < kMinTier || spec.tier > kMaxTier) {
    return Refuse(spec, absl::StrCat("tier: expected ", kMinTier, "..", kMaxTier, ", got ", spec.tier));
  }
  if (spec.members.empty()) return Refuse(spec, "members: expected at least one dtype entry point");
  std::set<DType> dtypes;
  const MemberContract& first = spec.members.front().contract;
  for (const CandidateMember& m : spec.members) {
    const MemberContract& c = m.contract;
    if (absl::Status s = ValidateMemberContract(c); !s.ok()) {
      return Refuse(spec, absl::StrCat(DTypeName(c.dtype), " member: ", s.message()));
    }
    if (!m.run) return Refuse(spec, absl::StrCat(DTypeName(c.dtype), " member: run: no entry point bound"));
    if (!dtypes.insert(c.dtype).second) {
      return Refuse(spec, absl::StrCat("members: dtype ", DTypeName(c.dtype), " bound twice"));
    }
    // A family describes one delegate: only entry point and tolerance may differ per member.
    if (c.arch != first.arch) {
      return Refuse(spec, absl::StrCat("family members disagree on arch: \"", first.arch,
                                       "\" vs \"", c.arch, "\""));
    }
    if (c.determinism != first.determinism) {
      return Refuse(spec, absl::StrCat("family members disagree on determinism: ",
                                       DeterminismName(first.determinism), " vs ",
                                       DeterminismName(c.determinism)));
    }
    if (!(c.shape == first.shape)) {
      return Refuse(spec, "family members disagree on shape coverage");
    }
    if (!(c.tile == first.tile)) return Refuse(spec, "family members disagree on tile");
  }
  return absl::OkStatus();
}

std::ostream& operator<<(std::ostream& os, const CandidateSpec& c) {
  return os << c.name << "@v" << c.version << " (tier " << c.tier << ")";
}

}  // namespace arbiter
