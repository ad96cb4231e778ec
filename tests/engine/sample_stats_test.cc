#include "engine/sample_stats.h"

#include "gtest/gtest.h"

namespace arbiter {
namespace {

TEST(SampleStatsTest, SummarizeGivesMedianQuartilesAndRelativeSpread) {
  const SampleStats s = Summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(s.spread, 2.0 / 3);
  EXPECT_EQ(Summarize({}).count, 0);
}

TEST(SampleStatsTest, CompareTakesTheRatioRoundByRound) {
  // Each round's samples share a factor (1, 3, 0.5, 2, 1): a's own spread is
  // huge, but it is 1.5x b's time in every round.
  RaceSamples samples;
  const double factor[] = {1, 3, 0.5, 2, 1};
  for (int round = 0; round < 5; ++round) {
    samples.Add("a", round, 15e-6 * factor[round]);
    samples.Add("b", round, 10e-6 * factor[round]);
  }
  const PairedRatio r = samples.Compare("a", "b");
  EXPECT_EQ(r.pairs, 5);
  EXPECT_DOUBLE_EQ(r.median, 1.5);
  EXPECT_DOUBLE_EQ(r.low, 1.5);  // the same in every round: both bounds are the ratio
  EXPECT_DOUBLE_EQ(r.high, 1.5);
  EXPECT_DOUBLE_EQ(samples.Compare("b", "a").median, 1 / 1.5);
}

TEST(SampleStatsTest, ComparePairsOnlyRoundsBothWereSampledIn) {
  RaceSamples samples(/*min_pairs=*/3);
  // a was sampled in rounds 0..5; b in 0..2 (then it stopped) and once more in 5.
  for (int round = 0; round < 6; ++round) samples.Add("a", round, 2e-6);
  samples.Add("b", 0, 1e-6);
  samples.Add("b", 1, 4e-6);
  samples.Add("b", 2, 2e-6);
  samples.Add("b", 5, 0.5e-6);
  const PairedRatio r = samples.Compare("a", "b");
  EXPECT_EQ(r.pairs, 4);
  // Ratios 2, 0.5, 1, 4: median 1.5; with 4 rounds the bounds are the extremes.
  EXPECT_DOUBLE_EQ(r.median, 1.5);
  EXPECT_DOUBLE_EQ(r.low, 0.5);
  EXPECT_DOUBLE_EQ(r.high, 4);
  EXPECT_EQ(samples.min_pairs(), 3);
}

TEST(SampleStatsTest, CompareWithAnUnsampledCandidateHasNoPairs) {
  RaceSamples samples;
  EXPECT_TRUE(samples.empty());
  samples.Add("a", 0, 1e-6);
  EXPECT_EQ(samples.Compare("a", "missing").pairs, 0);
  EXPECT_EQ(samples.Compare("missing", "a").pairs, 0);
}

TEST(SampleStatsTest, TheSignTestBoundRankGrowsWithTheRounds) {
  // The largest k with P(Binomial(n, 1/2) <= k - 1) <= 2.5%, at least 1.
  EXPECT_EQ(SignTestLowRank(0), 0);
  EXPECT_EQ(SignTestLowRank(1), 1);
  EXPECT_EQ(SignTestLowRank(5), 1);   // 1/32 > 2.5%: every round must agree
  EXPECT_EQ(SignTestLowRank(6), 1);   // 1/64
  EXPECT_EQ(SignTestLowRank(9), 2);   // 10/512 = 1.95%; 46/512 = 9% is over
  EXPECT_EQ(SignTestLowRank(10), 2);  // 11/1024; 56/1024 is over
  EXPECT_EQ(SignTestLowRank(20), 6);
  EXPECT_EQ(SignTestLowRank(100), 40);
}

TEST(SampleStatsTest, CompareBoundsTheMedianRatioFromBothSides) {
  // Ratios 0.9, 1.1, 1.2, ..., 1.9 over 10 rounds: the bounds are the 2nd smallest
  // and the 2nd largest.
  RaceSamples samples;
  for (int round = 0; round < 10; ++round) {
    samples.Add("a", round, (round == 0 ? 0.9 : 1.0 + 0.1 * round) * 1e-6);
    samples.Add("b", round, 1e-6);
  }
  const PairedRatio r = samples.Compare("a", "b");
  EXPECT_EQ(r.pairs, 10);
  EXPECT_EQ(r.low_rank, 2);
  EXPECT_NEAR(r.low, 1.1, 1e-12);
  EXPECT_NEAR(r.high, 1.8, 1e-12);
}

TEST(SampleStatsTest, AZeroTimeGivesNoRatio) {
  // A sample below the timer's resolution reads 0: no ratio, not an infinite one.
  RaceSamples samples;
  samples.Add("a", 0, 1e-6);
  samples.Add("b", 0, 0);
  samples.Add("a", 1, 1e-6);
  samples.Add("b", 1, 2e-6);
  const PairedRatio r = samples.Compare("a", "b");
  EXPECT_EQ(r.pairs, 1);
  EXPECT_DOUBLE_EQ(r.median, 0.5);
}

}  // namespace
}  // namespace arbiter
