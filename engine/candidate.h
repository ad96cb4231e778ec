// A matmul candidate: a stable name (the dispatch, store and force key, never
// derived from a symbol or file), a version (bumped when its code changes, so
// verdicts measured on another version are not served), a tier (the default
// order when nothing is measured) and a contract family - one member per dtype.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/contract.h"

namespace arbiter {

// Tier: 1 generic, 2 tuned, 3 hand-tuned or vendor delegate.
inline constexpr int kMinTier = 1;
inline constexpr int kMaxTier = 3;

// Launches the kernel on args.stream. Returns an error (never falls back to a
// reference) when it cannot run; UNIMPLEMENTED marks a decline.
using KernelFn = std::function<absl::Status(const GemmArgs&)>;

struct CandidateMember {
  MemberContract contract;
  KernelFn run;
};

struct CandidateSpec {
  std::string name;
  int version = 0;
  int tier = 0;
  std::string description;  // one line for operators
  std::vector<CandidateMember> members;

  // The member for `dtype`, or nullptr.
  const CandidateMember* Member(DType dtype) const;
};

// Checks name, version, tier, every member contract, and that family members
// agree on everything but entry point and accuracy and name distinct dtypes.
// INVALID_ARGUMENT naming the candidate and field.
absl::Status ValidateCandidate(const CandidateSpec& spec);

std::ostream& operator<<(std::ostream& os, const CandidateSpec& c);  // "name@v3 (tier 2)"

}  // namespace arbiter
