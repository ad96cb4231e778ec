// The candidates a daemon can choose from, validated at registration and
// checked against the live device: a candidate whose architecture claim excludes
// the device stays listed as ineligible, with the reason.
//
// Immutable after Create; thread-safe for concurrent reads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/candidate.h"

namespace arbiter {

struct RegisteredCandidate {
  CandidateSpec spec;
  bool device_ok = false;     // architecture claim admits the live device
  std::string device_reason;  // why not, when !device_ok
};

class Registry {
 public:
  // Refuses (INVALID_ARGUMENT naming the field) any invalid contract or a
  // duplicate name.
  static absl::StatusOr<std::unique_ptr<Registry>> Create(std::vector<CandidateSpec> candidates,
                                                          const Backend& backend);
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  const std::vector<RegisteredCandidate>& candidates() const { return candidates_; }
  // nullptr when unknown.
  const RegisteredCandidate* Find(const std::string& name) const;

  // Empty when the candidate may run `p` on this device (dtype member exists,
  // architecture admits the device, shape covered); else the reason.
  // Quarantine and determinism are the arbiter's to check.
  std::string CoverageGap(const RegisteredCandidate& c, const Problem& p) const;

 private:
  explicit Registry(std::vector<RegisteredCandidate> candidates)
      : candidates_(std::move(candidates)) {}
  std::vector<RegisteredCandidate> candidates_;
};

}  // namespace arbiter
