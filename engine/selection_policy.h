// The serving policy: which eligible candidate answers a problem, from what is
// known now. In order: an operator's force; a stored measured verdict that
// raced exactly the candidates eligible now; on a miss, the tuning policy
// measures first or answers with the tier default. These functions decide from
// the registry's candidates and the records handed to them - they read no
// store, touch no device and start no thread; the Arbiter fetches and acts.
//
// Thread-safe: free functions; the Quarantine they consult synchronizes itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/problem.h"
#include "engine/quarantine.h"
#include "engine/registry.h"
#include "engine/selection.h"
#include "engine/status.h"
#include "engine/verdict.h"
#include "engine/verdict_store.h"

namespace arbiter {

// Candidates that may run `p` on this device (coverage, architecture, quarantine),
// any determinism, in registration order. When there are none, `why_none` (if
// given) receives each candidate's reason.
std::vector<const RegisteredCandidate*> Eligible(const Registry& registry,
                                                 const Quarantine& quarantine, const Problem& p,
                                                 std::string* why_none);

// "name@version,..." sorted: the set a verdict must have raced to be served.
std::string RacedSet(const std::vector<const RegisteredCandidate*>& eligible);

// The forced candidate when it is eligible for `p` and meets `required`;
// nullopt when the force does not apply.
std::optional<Selection> SelectForced(const Force& force, const Problem& p,
                                      const std::vector<const RegisteredCandidate*>& eligible,
                                      Determinism required);

// From a measured verdict of `p`'s bucket: its winner while still eligible and
// meeting `required`; else the winner the same figures give among the candidates
// still eligible (Decide with no incumbent); else the tier default.
absl::StatusOr<Selection> SelectFromVerdict(const Verdict& v, const Problem& p,
                                            const std::vector<const RegisteredCandidate*>& eligible,
                                            Determinism required, const NoisePolicy& noise);

// The tier default among `eligible` meeting `required`, with `source` and the
// reason `why`. FAILED_PRECONDITION when none meets `required`.
absl::StatusOr<Selection> SelectTierDefault(const Problem& p,
                                            const std::vector<const RegisteredCandidate*>& eligible,
                                            Determinism required, VerdictSource source,
                                            const std::string& why);

}  // namespace arbiter
