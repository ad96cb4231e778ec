#include "engine/selection_policy.h"

#include "gtest/gtest.h"
#include "tests/engine/fake_engine.h"

namespace arbiter {
namespace {

using testing::FakeEngine;
using testing::FakeCandidate;
using testing::TimedKernel;

const Problem kP{DType::kF32, 24, 40, 64};

CandidateResult Timed(const CandidateSpec& c, double median, Determinism det) {
  CandidateResult r;
  r.name = c.name;
  r.version = c.version;
  r.tier = c.tier;
  r.determinism = det;
  r.state = ResultState::kTimed;
  r.median_seconds = median;
  r.spread = 0.01;
  r.samples = 5;
  return r;
}

class SelectionPolicyTest : public ::testing::Test {
 protected:
  // fast (tier 1, run_to_run), vendor (tier 3), atomic (tier 3, nondeterministic),
  // then whatever `extra` adds.
  void Start(std::vector<CandidateSpec> extra = {}) {
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("fast", 1, TimedKernel(1e-6), Determinism::kRunToRun));
    c.push_back(FakeCandidate("vendor", 3, TimedKernel(1e-6), Determinism::kRunToRun));
    c.push_back(FakeCandidate("atomic", 3, TimedKernel(1e-6), Determinism::kNondeterministic));
    for (CandidateSpec& e : extra) c.push_back(std::move(e));
    ASSERT_TRUE(engine_.Start(std::move(c)).ok());
  }
  std::vector<const RegisteredCandidate*> EligibleFor(const Problem& p, std::string* why = nullptr) {
    return Eligible(*engine_.registry, *engine_.quarantine, p, why);
  }
  const CandidateSpec& Spec(const std::string& name) { return engine_.Spec(name); }
  // A measured verdict of kP's bucket over `eligible`, won by `winner`.
  Verdict Measured(const std::vector<const RegisteredCandidate*>& eligible, const std::string& winner) {
    Verdict v;
    v.dtype = kP.dtype;
    v.bucket = BucketOf(kP);
    v.candidates = RacedSet(eligible);
    v.winner = winner;
    v.winner_version = Spec(winner).version;
    v.reason = "fastest in budget";
    v.results = {Timed(Spec("fast"), 10e-6, Determinism::kRunToRun),
                 Timed(Spec("vendor"), 20e-6, Determinism::kRunToRun),
                 Timed(Spec("atomic"), 5e-6, Determinism::kNondeterministic)};
    return v;
  }

  FakeEngine engine_;
};

TEST_F(SelectionPolicyTest, EligibleKeepsRegistrationOrderAndLeavesOutWhatCannotRunHere) {
  CandidateSpec gpu = FakeCandidate("gpu_only", 3, TimedKernel(1e-6));
  for (auto& m : gpu.members) m.contract.arch = "sm_90a";
  CandidateSpec small = FakeCandidate("small_m", 2, TimedKernel(1e-6));
  for (auto& m : small.members) m.contract.shape.max_m = 16;
  std::vector<CandidateSpec> extra;
  extra.push_back(std::move(gpu));
  extra.push_back(std::move(small));
  Start(std::move(extra));
  ASSERT_TRUE(engine_.quarantine->Add("vendor", 1, QuarantineScope::OfDType(DType::kF32), "bad").ok());
  std::vector<std::string> names;
  for (const RegisteredCandidate* c : EligibleFor(kP)) names.push_back(c->spec.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fast", "atomic"}));
  // vendor is quarantined for f32 only.
  EXPECT_EQ(EligibleFor(Problem{DType::kF64, 24, 40, 64}).size(), 3u);
}

TEST_F(SelectionPolicyTest, WhenNothingIsEligibleEachCandidateSaysWhy) {
  Start();
  for (const char* name : {"fast", "vendor", "atomic"}) {
    ASSERT_TRUE(engine_.quarantine->Add(name, 1, QuarantineScope::Everywhere(), "bad").ok());
  }
  std::string why;
  EXPECT_TRUE(EligibleFor(kP, &why).empty());
  EXPECT_EQ(why, "fast: quarantined; vendor: quarantined; atomic: quarantined");
}

TEST_F(SelectionPolicyTest, RacedSetIsSortedNameAtVersion) {
  Start();
  EXPECT_EQ(RacedSet(EligibleFor(kP)), "atomic@1,fast@1,vendor@1");
}

TEST_F(SelectionPolicyTest, ForceAppliesOnlyToAnEligibleCandidateMeetingTheRequirement) {
  Start();
  const Force force{"fp", kP.dtype, BucketOf(kP), "atomic", "pinned", 0, VerdictScope()};
  std::optional<Selection> s = SelectForced(force, kP, EligibleFor(kP), Determinism::kNondeterministic);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->candidate, "atomic");
  EXPECT_EQ(s->source, VerdictSource::kForced);
  EXPECT_EQ(s->member, Spec("atomic").Member(DType::kF32));
  EXPECT_EQ(s->reason, "forced: pinned");
  EXPECT_FALSE(SelectForced(force, kP, EligibleFor(kP), Determinism::kRunToRun).has_value());
  ASSERT_TRUE(engine_.quarantine->Add("atomic", 1, QuarantineScope::Everywhere(), "bad").ok());
  EXPECT_FALSE(SelectForced(force, kP, EligibleFor(kP), Determinism::kNondeterministic).has_value());
}

TEST_F(SelectionPolicyTest, AVerdictServesItsWinnerWithThatCandidatesMember) {
  Start();
  const auto eligible = EligibleFor(kP);
  absl::StatusOr<Selection> s = SelectFromVerdict(Measured(eligible, "atomic"), kP, eligible,
                                                  Determinism::kNondeterministic, NoisePolicy{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->candidate, "atomic");
  EXPECT_EQ(s->source, VerdictSource::kMeasured);
  EXPECT_EQ(s->reason, "fastest in budget");
  EXPECT_EQ(s->member, Spec("atomic").Member(DType::kF32));
  ASSERT_TRUE(s->verdict.has_value());
}

TEST_F(SelectionPolicyTest, AStricterRequirementIsDerivedFromTheSameFigures) {
  Start();
  const auto eligible = EligibleFor(kP);
  absl::StatusOr<Selection> s = SelectFromVerdict(Measured(eligible, "atomic"), kP, eligible,
                                                  Determinism::kRunToRun, NoisePolicy{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->candidate, "fast");  // 10us against vendor's 20us
  EXPECT_EQ(s->source, VerdictSource::kMeasured);
  EXPECT_NE(s->reason.find("derived from the measured figures for run_to_run"), std::string::npos)
      << s->reason;
  EXPECT_EQ(s->member, Spec("fast").Member(DType::kF32));
}

TEST_F(SelectionPolicyTest, AWinnerQuarantinedSinceIsNotServed) {
  Start();
  const Verdict v = Measured(EligibleFor(kP), "atomic");
  ASSERT_TRUE(engine_.quarantine->Add("atomic", 1, QuarantineScope::Everywhere(), "bad").ok());
  absl::StatusOr<Selection> s =
      SelectFromVerdict(v, kP, EligibleFor(kP), Determinism::kNondeterministic, NoisePolicy{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->candidate, "fast");
}

TEST_F(SelectionPolicyTest, TierDefaultIsTheFirstRegisteredOfTheHighestTierMeetingTheRequirement) {
  Start();
  const auto eligible = EligibleFor(kP);
  absl::StatusOr<Selection> any = SelectTierDefault(kP, eligible, Determinism::kNondeterministic,
                                                    VerdictSource::kTierDefault, "tuning is off");
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->candidate, "vendor");  // tier 3, registered before atomic
  EXPECT_EQ(any->reason, "tier default (tier 3): tuning is off");
  EXPECT_EQ(any->member, Spec("vendor").Member(DType::kF32));
  absl::StatusOr<Selection> provisional = SelectTierDefault(
      kP, eligible, Determinism::kRunToRun, VerdictSource::kProvisional, "measuring");
  ASSERT_TRUE(provisional.ok());
  EXPECT_EQ(provisional->source, VerdictSource::kProvisional);
  absl::StatusOr<Selection> none = SelectTierDefault(kP, eligible, Determinism::kBatchInvariant,
                                                     VerdictSource::kTierDefault, "");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("guarantees batch_invariant"), std::string::npos)
      << none.status();
}

}  // namespace
}  // namespace arbiter
