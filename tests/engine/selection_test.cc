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

// Paired decisions. `factor` is what every sample of a round shares (the clock,
// the flush, the driver): a candidate's own spread is huge, though one may be
// faster in every round.
const std::vector<double> kRoundFactor = {1, 3, 0.5, 2.5, 1, 4, 0.6, 2, 1.5};

// A candidate timed in rounds 0, 1, ... with `seconds` there, added to
// `samples`; its result is their summary, as the measurer makes it.
CandidateResult TimedIn(RaceSamples& samples, std::string name, int tier,
                        const std::vector<double>& seconds) {
  for (size_t i = 0; i < seconds.size(); ++i) samples.Add(name, static_cast<int>(i), seconds[i]);
  const SampleStats st = Summarize(seconds);
  CandidateResult r = Timed(std::move(name), tier, st.median, st.spread);
  r.samples = st.count;
  return r;
}

// `base` seconds scaled by each round's factor and by `own[round % own.size()]`.
std::vector<double> Series(double base, const std::vector<double>& own = {1}) {
  std::vector<double> out;
  for (size_t i = 0; i < kRoundFactor.size(); ++i) {
    out.push_back(base * kRoundFactor[i] * own[i % own.size()]);
  }
  return out;
}

TEST(SelectionTest, AChallengerFasterInEveryRoundDisplacesThoughEachOnesSpreadIsHuge) {
  RaceSamples samples;
  const std::vector<CandidateResult> r = {TimedIn(samples, "vendor", 3, Series(22.6e-6)),
                                          TimedIn(samples, "ours", 2, Series(14.4e-6))};
  ASSERT_GT(r[0].spread, 0.5) << "the spread the test means to plant";
  // On each one's own figures, a 57% margin is within 2 x the spread: not separated.
  const Decision alone = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise);
  EXPECT_EQ(alone.winner, "vendor") << alone.reason;
  // Round by round, ours took 0.64x vendor's time every time.
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples);
  EXPECT_EQ(d.winner, "ours") << d.reason;
  EXPECT_NE(d.reason.find(
                "paired over 9 rounds: margin 56.9% (over 56.9% in 8 of them) beats noise 2 x 1.0%"),
            std::string::npos)
      << d.reason;
}

TEST(SelectionTest, AChallengerFasterInEveryRoundWinsThoughAScatteringOneHasTheLowerMedian) {
  // "steady" takes 0.8x vendor's time in every round; "scatter" has the lowest
  // median but is by turns far faster and far slower than vendor.
  RaceSamples samples;
  const std::vector<CandidateResult> r = {
      TimedIn(samples, "vendor", 3, Series(10e-6)),
      TimedIn(samples, "scatter", 2, Series(10e-6, {0.3, 1.6, 0.5})),
      TimedIn(samples, "steady", 2, Series(8e-6))};
  ASSERT_LT(r[1].median_seconds, r[2].median_seconds) << "scatter must be the fastest by median";
  const Decision alone = Decide({r[0], r[1]}, Determinism::kNondeterministic, std::nullopt,
                                kNoise, &samples);
  ASSERT_EQ(alone.winner, "vendor") << "scatter alone must not be separated: " << alone.reason;
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples);
  EXPECT_EQ(d.winner, "steady") << d.reason;
  EXPECT_NE(d.reason.find("fastest separated"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("scatter"), std::string::npos) << d.reason;
}

TEST(SelectionTest, NoChallengerSeparatedKeepsTheIncumbentAndNamesTheFastest) {
  RaceSamples samples;
  const std::vector<CandidateResult> r = {
      TimedIn(samples, "vendor", 3, Series(10e-6)),
      TimedIn(samples, "scatter", 2, Series(10e-6, {0.3, 1.6, 0.5})),
      TimedIn(samples, "close", 2, Series(10e-6 / 1.015))};
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples);
  EXPECT_EQ(d.winner, "vendor") << d.reason;
  EXPECT_EQ(d.reason.rfind("not separated: scatter ", 0), 0u) << d.reason;
}

TEST(SelectionTest, AChallengerFasterInNearlyEveryRoundDisplacesAnIncumbentWhoseOwnSamplesAreBimodal) {
  // A vendor kernel whose samples fall in two modes of their own (not the
  // round's: a second launch that sometimes waits), against one that holds
  // steady: the vendor was slower in 9 of 10 rounds, by over 9% in each of
  // those. The ratios' own spread is as wide as the margin, which the spread
  // rule (2 x IQR / median) calls noise; by the sign test it is not.
  RaceSamples samples;
  const std::vector<double> vendor = {70, 52, 90, 55, 75, 53, 95, 56, 72, 45};
  const std::vector<double> ours = {47, 47.5, 46.5, 48, 47, 47.2, 46.8, 47.1, 47.4, 46.9};
  std::vector<double> v_s, o_s;
  for (double t : vendor) v_s.push_back(t * 1e-6);
  for (double t : ours) o_s.push_back(t * 1e-6);
  const std::vector<CandidateResult> r = {TimedIn(samples, "vendor", 3, v_s),
                                          TimedIn(samples, "ours", 2, o_s)};
  std::vector<double> ratios;
  for (size_t i = 0; i < vendor.size(); ++i) ratios.push_back(vendor[i] / ours[i]);
  const SampleStats paired = Summarize(ratios);
  ASSERT_GT(2 * paired.spread, paired.median - 1) << "the scatter the test means to plant";
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples);
  EXPECT_EQ(d.winner, "ours") << d.reason;
  EXPECT_NE(d.reason.find("in 9 of them) beats noise 2 x 1.0%"), std::string::npos) << d.reason;
}

TEST(SelectionTest, AChallengerFasterInMostButNotNearlyAllRoundsStaysNotSeparated) {
  // Faster by 30% in 7 rounds of 10, slower in 3: a large median margin, but
  // 3 rounds of 10 against it are more than chance allows at 97.5%.
  RaceSamples samples;
  const std::vector<double> vendor = {13, 13, 9, 13, 13, 9, 13, 13, 9, 13};
  std::vector<double> v_s, o_s;
  for (double t : vendor) v_s.push_back(t * 1e-6);
  for (size_t i = 0; i < vendor.size(); ++i) o_s.push_back(10e-6);
  const std::vector<CandidateResult> r = {TimedIn(samples, "vendor", 3, v_s),
                                          TimedIn(samples, "ours", 2, o_s)};
  ASSERT_LT(r[1].median_seconds, r[0].median_seconds) << "the challenger must be the fastest";
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples);
  EXPECT_EQ(d.winner, "vendor") << d.reason;
  EXPECT_NE(d.reason.find("not separated"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("margin 30.0%"), std::string::npos) << d.reason;
}

TEST(SelectionTest, TwoRunsOfTheSameKernelStayNotSeparatedRoundByRound) {
  // The same kernel twice: which one a round favours alternates, by up to 3%.
  RaceSamples samples;
  const std::vector<CandidateResult> r = {
      TimedIn(samples, "vendor", 3, Series(10e-6)),
      TimedIn(samples, "again", 2, Series(10e-6, {1.02, 0.97, 1.03, 0.98, 0.99}))};
  ASSERT_LT(r[1].median_seconds, r[0].median_seconds) << "the challenger must be the fastest";
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples);
  EXPECT_EQ(d.winner, "vendor") << d.reason;
  EXPECT_NE(d.reason.find("not separated"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("paired over 9 rounds"), std::string::npos) << d.reason;
}

TEST(SelectionTest, AChallengerFasterInOnlySomeRoundsStaysNotSeparated) {
  // 15% faster in one round, 10% slower in the next, in turn: its median is
  // lower, but the rounds do not agree on which is faster.
  RaceSamples samples;
  const std::vector<CandidateResult> r = {
      TimedIn(samples, "vendor", 3, Series(10e-6)),
      TimedIn(samples, "ours", 2, Series(10e-6, {0.85, 1.1}))};
  ASSERT_LT(r[1].median_seconds, r[0].median_seconds) << "the challenger must be the fastest";
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples);
  EXPECT_EQ(d.winner, "vendor") << d.reason;
  EXPECT_NE(d.reason.find("not separated"), std::string::npos) << d.reason;
}

TEST(SelectionTest, AConsistentMarginUnderTheNoiseFloorStaysNotSeparated) {
  // 1.5% faster in every round: the ratios agree exactly, but the floor holds.
  RaceSamples samples;
  const std::vector<CandidateResult> r = {TimedIn(samples, "vendor", 3, Series(10e-6)),
                                          TimedIn(samples, "ours", 2, Series(10e-6 / 1.015))};
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples);
  EXPECT_EQ(d.winner, "vendor") << d.reason;
}

TEST(SelectionTest, TooFewRoundsTogetherFallBackToEachOnesSpread) {
  // Ours was 0.6x vendor's time in each of the 4 rounds it was sampled in (then
  // it stopped): under min_pairs (5) rounds together, the paired figures decide
  // nothing, and on each one's own spread the margin is within the noise.
  RaceSamples samples(/*min_pairs=*/5);
  std::vector<double> ours = Series(6e-6);
  ours.resize(4);
  const std::vector<CandidateResult> r = {TimedIn(samples, "vendor", 3, Series(10e-6)),
                                          TimedIn(samples, "ours", 2, ours)};
  ASSERT_EQ(samples.Compare("vendor", "ours").pairs, 4);
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples);
  EXPECT_EQ(d.winner, "vendor") << d.reason;
  EXPECT_NE(d.reason.find("per-candidate spreads (4 rounds paired, under 5)"), std::string::npos)
      << d.reason;
}

TEST(SelectionTest, NothingTimedMeansNoWinner) {
  const std::vector<CandidateResult> r = {Failed("a", 3), Failed("b", 1)};
  const Decision d = Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise);
  EXPECT_TRUE(d.winner.empty());
  EXPECT_FALSE(d.reason.empty());
}

TEST(SelectionTest, AChallengerAheadByMedianButNotSeparatedIsAnUnsettledPair) {
  // `ours` is 4% faster in 8 rounds of 10 and level in 2: ahead by median beyond
  // the 1% floor, but 2 rounds of 10 against it are too many to separate.
  RaceSamples samples;
  std::vector<double> ours;
  for (int i = 0; i < 10; ++i) ours.push_back(i == 2 || i == 6 ? 10e-6 : 9.6e-6);
  const std::vector<CandidateResult> r = {
      TimedIn(samples, "vendor", 3, std::vector<double>(10, 10e-6)),
      TimedIn(samples, "ours", 2, ours)};
  ASSERT_EQ(Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples).winner,
            "vendor");
  EXPECT_EQ(UnsettledPair(r, Determinism::kNondeterministic, std::nullopt, kNoise, samples),
            (std::vector<std::string>{"vendor", "ours"}));
}

TEST(SelectionTest, ASeparatedChallengerOrOneWithinTheFloorIsNoUnsettledPair) {
  const auto pair = [](double ours_seconds, int rounds) {
    RaceSamples samples;
    const std::vector<CandidateResult> r = {
        TimedIn(samples, "vendor", 3, std::vector<double>(rounds, 10e-6)),
        TimedIn(samples, "ours", 2, std::vector<double>(rounds, ours_seconds))};
    return UnsettledPair(r, Determinism::kNondeterministic, std::nullopt, kNoise, samples);
  };
  EXPECT_TRUE(pair(9.6e-6, 10).empty()) << "4% faster in every round: separated, ours wins";
  EXPECT_TRUE(pair(9.95e-6, 10).empty()) << "0.5% faster: within the floor, a tie";
  EXPECT_TRUE(pair(10.5e-6, 10).empty()) << "slower: the incumbent is the fastest";
  EXPECT_TRUE(pair(9.85e-6, 3).empty()) << "fewer rounds than min_pairs: nothing paired to extend";
}

TEST(SelectionTest, AMedianShortOfTheSeparatingMarginIsNotExtended) {
  // `ours` is 1.5% faster in 8 rounds of 10 and level in 2: ahead by median beyond
  // the 1% floor, but short of the 2 x 1% a separation needs, which no number
  // of rounds would bring its bound past: no extra rounds are spent on it.
  RaceSamples samples;
  std::vector<double> ours;
  for (int i = 0; i < 10; ++i) ours.push_back(i == 2 || i == 6 ? 10e-6 : 10e-6 / 1.015);
  const std::vector<CandidateResult> r = {
      TimedIn(samples, "vendor", 3, std::vector<double>(10, 10e-6)),
      TimedIn(samples, "ours", 2, ours)};
  ASSERT_EQ(Decide(r, Determinism::kNondeterministic, std::nullopt, kNoise, &samples).winner,
            "vendor");
  EXPECT_TRUE(UnsettledPair(r, Determinism::kNondeterministic, std::nullopt, kNoise, samples)
                  .empty());
}

}  // namespace
}  // namespace arbiter
