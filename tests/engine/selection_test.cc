#include "engine/selection.h"

#include "gtest/gtest.h"

namespace arbiter {
namespace {

CandidateResult Timed(std::string name, int tier, double median, double spread,
                      Determinism det = Determinism::kRunToRun) {
  CandidateResult r;
  r.name = std::move(name);
  r.version = 1;
  r.tier = tier;
  r.determinism = det;
  r.state = ResultState::kTimed;
  r.median_seconds = median;
  r.spread = spread;
  r.samples = 10;
  return r;
}

CandidateResult Failed(std::string name, int tier) {
  CandidateResult r;
  r.name = std::move(name);
  r.version = 1;
  r.tier = tier;
  r.state = ResultState::kFailedOracle;
  r.reason = "out of budget";
  return r;
}

const NoisePolicy kNoise{2.0, 0.01};

TEST(SelectionTest, ChallengerWithinNoiseDoesNotDisplace) {
  // 3% faster, but each measurement wobbles by 5%: not separated, the tier default stays.
  const std::vector<CandidateResult> r = {Timed("vendor", 3, 100e-6, 0.05),
                                          Timed("ours", 2, 97e-6, 0.05)};
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise);
  EXPECT_EQ(d.winner, "vendor");
  EXPECT_NE(d.reason.find("not separated"), std::string::npos) << d.reason;
}

TEST(SelectionTest, ClearlyFasterChallengerDisplaces) {
  const std::vector<CandidateResult> r = {Timed("vendor", 3, 100e-6, 0.02),
                                          Timed("ours", 2, 60e-6, 0.02)};
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise);
  EXPECT_EQ(d.winner, "ours");
  EXPECT_NE(d.reason.find("beats noise"), std::string::npos) << d.reason;
}

TEST(SelectionTest, PreviousWinnerIsTheIncumbent) {
  // "ours" won before; "vendor" is now 1% faster with 2% noise: "ours" keeps the bucket.
  const std::vector<CandidateResult> r = {Timed("vendor", 3, 99e-6, 0.02),
                                          Timed("ours", 2, 100e-6, 0.02)};
  EXPECT_EQ(Decide(r, Determinism::kNondeterministic, std::string("ours"), kNoise).winner, "ours");
  EXPECT_EQ(Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise).winner, "vendor");
}

TEST(SelectionTest, NoiseFloorAppliesWhenSpreadsAreZero) {
  // A 1.5% margin with zero measured spread is still under 2 x the 1% floor.
  const std::vector<CandidateResult> r = {Timed("vendor", 3, 100e-6, 0.0),
                                          Timed("ours", 2, 98.5e-6, 0.0)};
  EXPECT_EQ(Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise).winner, "vendor");
}

TEST(SelectionTest, FailedCandidatesNeverWinEvenOnTier) {
  const std::vector<CandidateResult> r = {Failed("vendor", 3), Timed("generic", 1, 1e-3, 0.01)};
  const Decision d = Decide(r, Determinism::kNondeterministic, std::string("vendor"), kNoise);
  EXPECT_EQ(d.winner, "generic");
}

TEST(SelectionTest, TierDefaultIsTheHighestTierAndTheEarliestListedOnATie) {
  const std::vector<CandidateResult> r = {Timed("generic", 1, 1e-3, 0.01),
                                          Timed("first_vendor", 3, 2e-3, 0.01),
                                          Timed("tuned", 2, 1e-4, 0.01),
                                          Timed("second_vendor", 3, 1e-5, 0.01)};
  const auto any = [](const CandidateResult&) { return true; };
  auto best = TierDefault(r, any, &CandidateResult::tier);
  ASSERT_NE(best, r.end());
  EXPECT_EQ(best->name, "first_vendor");  // tier 3, listed before second_vendor; speed is no part of it
  auto below_3 = TierDefault(r, [](const CandidateResult& c) { return c.tier < 3; },
                             &CandidateResult::tier);
  ASSERT_NE(below_3, r.end());
  EXPECT_EQ(below_3->name, "tuned");
}

TEST(SelectionTest, TierDefaultOfNothingAllowedIsTheEnd) {
  const std::vector<CandidateResult> r = {Timed("generic", 1, 1e-3, 0.01)};
  EXPECT_EQ(TierDefault(r, [](const CandidateResult&) { return false; }, &CandidateResult::tier),
            r.end());
}

TEST(SelectionTest, TierDefaultIncumbentIsDisplacedOnlyByAClearMargin) {
  // No previous winner: the incumbent is the tier default among the timed, the
  // first-listed tier 3; the other tier 3 is 1% faster, within noise.
  const std::vector<CandidateResult> r = {Timed("first_vendor", 3, 100e-6, 0.02),
                                          Timed("second_vendor", 3, 99e-6, 0.02)};
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise);
  EXPECT_EQ(d.winner, "first_vendor");
  EXPECT_NE(d.reason.find("tier default first_vendor"), std::string::npos) << d.reason;
}

TEST(SelectionTest, DeterminismRequirementFiltersCandidates) {
  const std::vector<CandidateResult> r = {
      Timed("atomic", 2, 10e-6, 0.01, Determinism::kNondeterministic),
      Timed("fixed", 2, 50e-6, 0.01, Determinism::kRunToRun),
      Timed("invariant", 1, 80e-6, 0.01, Determinism::kBatchInvariant)};
  EXPECT_EQ(Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise).winner, "atomic");
  EXPECT_EQ(Decide(r, Determinism::kRunToRun, std::nullopt, kNoise).winner, "fixed");
  EXPECT_EQ(Decide(r, Determinism::kBatchInvariant, std::nullopt, kNoise).winner, "invariant");
}

TEST(SelectionTest, ErraticIncumbentDoesNotProtectItself) {
  // An incumbent whose samples spread 250% is still displaced by a challenger 30x faster:
  // the speedup (2900%) beats 2 x 250%.
  const std::vector<CandidateResult> r = {Timed("vendor", 3, 2e-3, 2.5),
                                          Timed("ours", 2, 64e-6, 0.05)};
  EXPECT_EQ(Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise).winner, "ours");
}

TEST(SelectionTest, NothingTimedMeansNoWinner) {
  const std::vector<CandidateResult> r = {Failed("a", 3), Failed("b", 1)};
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise);
  EXPECT_TRUE(d.winner.empty());
  EXPECT_FALSE(d.reason.empty());
}

}  // namespace
}  // namespace arbiter
