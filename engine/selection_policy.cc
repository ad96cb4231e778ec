#include "engine/selection_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/refinement.h"

namespace arbiter {

namespace {

bool Meets(const RegisteredCandidate& c, DType dtype, Determinism required) {
  return c.spec.Member(dtype)->contract.determinism >= required;
}

// The selection of eligible candidate `c` for `p`.
Selection Of(const RegisteredCandidate& c, const Problem& p, VerdictSource source,
             std::string reason) {
  Selection s;
  s.candidate = c.spec.name;
  s.version = c.spec.version;
  s.member = c.spec.Member(p.dtype);
  s.source = source;
  s.bucket = BucketOf(p);
  s.reason = std::move(reason);
  return s;
}

const RegisteredCandidate* Find(const std::vector<const RegisteredCandidate*>& eligible,
                                const std::string& name, int version) {
  for (const RegisteredCandidate* c : eligible) {
    if (c->spec.name == name && c->spec.version == version) return c;
  }
  return nullptr;
}

}  // namespace

std::vector<const RegisteredCandidate*> Eligible(const Registry& registry,
                                                 const Quarantine& quarantine, const Problem& p,
                                                 std::string* why_none) {
  std::vector<const RegisteredCandidate*> out;
  std::vector<std::string> reasons;
  const Bucket bucket = BucketOf(p);
  for (const RegisteredCandidate& c : registry.candidates()) {
    std::string gap = registry.CoverageGap(c, p);
    if (gap.empty() && quarantine.Covers(c.spec, p.dtype, bucket)) gap = "quarantined";
    if (gap.empty()) {
      out.push_back(&c);
    } else {
      reasons.push_back(absl::StrCat(c.spec.name, ": ", gap));
    }
  }
  if (out.empty() && why_none) *why_none = absl::StrJoin(reasons, "; ");
  return out;
}

std::string RacedSet(const std::vector<const RegisteredCandidate*>& eligible) {
  std::vector<std::string> names;
  for (const RegisteredCandidate* c : eligible) {
    names.push_back(absl::StrCat(c->spec.name, "@", c->spec.version));
  }
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ",");
}

std::optional<Selection> SelectForced(const Force& force, const Problem& p,
                                      const std::vector<const RegisteredCandidate*>& eligible,
                                      Determinism required) {
  for (const RegisteredCandidate* c : eligible) {
    if (c->spec.name != force.candidate) continue;
    if (!Meets(*c, p.dtype, required)) return std::nullopt;
    return Of(*c, p, VerdictSource::kForced,
              force.scope.whole()
                  ? absl::StrCat("forced: ", force.reason)
                  : absl::StrCat("forced at ", force.scope.ToString(), ": ", force.reason));
  }
  return std::nullopt;
}

absl::StatusOr<Selection> SelectFromVerdict(const Verdict& v, const Problem& p,
                                            const std::vector<const RegisteredCandidate*>& eligible,
                                            Determinism required, const NoisePolicy& noise) {
  // Only candidates still eligible for this exact problem (quarantine may have come since).
  std::vector<CandidateResult> usable;
  for (const CandidateResult& r : v.results) {
    if (Find(eligible, r.name, r.version)) usable.push_back(r);
  }
  const bool winner_usable =
      std::any_of(usable.begin(), usable.end(), [&](const CandidateResult& r) {
        return r.name == v.winner && r.determinism >= required && r.timed();
      });
  std::string winner = v.winner;
  int winner_version = v.winner_version;
  std::string reason = v.reason;
  if (!winner_usable) {
    // Derived from the same figures for a stricter determinism, or without a quarantined winner.
    // A refinement's figures have no incumbent (refinement.h): the fastest meeting it.
    const Decision d = v.scope.kind == VerdictScope::Kind::kShape
                           ? DecideRefinement(usable, required, std::nullopt, std::nullopt, noise)
                           : Decide(usable, required, std::nullopt, noise);
    if (d.winner.empty()) {
      return SelectTierDefault(p, eligible, required, VerdictSource::kTierDefault,
                               absl::StrCat("the measured verdict has no usable candidate meeting ",
                                            DeterminismName(required), " (", d.reason, ")"));
    }
    winner = d.winner;
    winner_version = d.winner_version;
    reason = absl::StrCat("derived from the measured figures for ", DeterminismName(required),
                          ": ", d.reason);
  }
  const RegisteredCandidate* c = Find(eligible, winner, winner_version);
  if (c == nullptr) {
    return absl::InternalError(absl::StrCat("verdict winner ", winner, "@", winner_version,
                                            " is not among the eligible candidates for ",
                                            p.ToString()));
  }
  Selection s = Of(*c, p, VerdictSource::kMeasured, std::move(reason));
  s.bucket = v.bucket;
  s.verdict = v;
  s.verdict->scoped.clear();  // the verdict that decided, not the bucket's others
  return s;
}

absl::StatusOr<Selection> SelectTierDefault(const Problem& p,
                                            const std::vector<const RegisteredCandidate*>& eligible,
                                            Determinism required, VerdictSource source,
                                            const std::string& why) {
  auto best = TierDefault(
      eligible, [&](const RegisteredCandidate* c) { return Meets(*c, p.dtype, required); },
      [](const RegisteredCandidate* c) { return c->spec.tier; });
  if (best == eligible.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no eligible candidate for ", p.ToString(), " guarantees ", DeterminismName(required)));
  }
  const RegisteredCandidate& c = **best;
  return Of(c, p, source, absl::StrCat("tier default (tier ", c.spec.tier, "): ", why));
}

}  // namespace arbiter
