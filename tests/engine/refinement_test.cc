#include "engine/refinement.h"

#include <algorithm>
#include <map>

#include "gtest/gtest.h"

namespace arbiter {
namespace {

CandidateResult TimedResult(const std::string& name, double seconds,
                            Determinism d = Determinism::kNondeterministic) {
  CandidateResult r;
  r.name = name;
  r.version = 1;
  r.determinism = d;
  r.state = ResultState::kTimed;
  r.median_seconds = seconds;
  r.spread = 0.01;
  r.samples = 5;
  return r;
}

Verdict BucketVerdict(std::vector<CandidateResult> results, const std::string& winner) {
  Verdict v;
  v.dtype = DType::kF32;
  v.measured = Problem{DType::kF32, 64, 64, 64};
  v.bucket = BucketOf(v.measured);
  v.results = std::move(results);
  v.winner = winner;
  v.winner_version = 1;
  v.source = VerdictSource::kMeasured;
  return v;
}

TEST(RefinementTest, LeadersAreTheWinnerAndThoseWithinTheMarginNeverTheFailedOrSlow) {
  CandidateResult failed;
  failed.name = "wrong";
  failed.state = ResultState::kFailedOracle;
  const Verdict v = BucketVerdict({TimedResult("slow", 30e-6), TimedResult("win", 10e-6),
                                   TimedResult("close", 11e-6), failed},
                                  "win");
  RefineOptions options;
  options.leader_margin = 0.25;
  const std::vector<std::string> leaders = Leaders(v, options);
  EXPECT_EQ(leaders, (std::vector<std::string>{"win", "close"}));
}

TEST(RefinementTest, LeadersKeepTheFastestOfEachDeterminismLevelBesideTheCappedContenders) {
  const Verdict v = BucketVerdict(
      {TimedResult("win", 10e-6), TimedResult("a", 10.5e-6), TimedResult("b", 10.6e-6),
       TimedResult("c", 10.7e-6), TimedResult("strict", 40e-6, Determinism::kBatchInvariant)},
      "win");
  RefineOptions options;
  options.max_leaders = 3;
  const std::vector<std::string> leaders = Leaders(v, options);
  EXPECT_EQ(leaders, (std::vector<std::string>{"win", "strict", "a", "b"}))
      << "the winner and the two closest under the cap of 3, and beside them the only one a "
         "batch_invariant request can be served, far slower as it is";
}

TEST(RefinementTest, LeadersRaceTheFastestOfALooserDeterminismClassWithinReachOfTheWinner) {
  // As at 16x16x65536 on the H200: `ordered` (split-K partials summed in order,
  // run_to_run) wins; `atomic` (split-K by atomics, nondeterministic) is 1.29x
  // slower there, outside the leaders' 25%, yet the fastest at 16x16x32776 of the
  // same bucket; `far` (nondeterministic too) is out of reach.
  const Verdict v = BucketVerdict(
      {TimedResult("ordered", 15.46e-6, Determinism::kRunToRun),
       TimedResult("vendor", 22.6e-6, Determinism::kRunToRun),
       TimedResult("atomic", 19.9e-6, Determinism::kNondeterministic),
       TimedResult("far", 400e-6, Determinism::kNondeterministic),
       TimedResult("strict", 23.9e-6, Determinism::kBatchInvariant)},
      "ordered");
  const std::vector<std::string> leaders = Leaders(v, RefineOptions{});
  EXPECT_NE(std::find(leaders.begin(), leaders.end(), "atomic"), leaders.end())
      << "the fastest nondeterministic candidate, within tile_margin of the winner";
  EXPECT_EQ(std::find(leaders.begin(), leaders.end(), "far"), leaders.end());
  EXPECT_EQ(std::find(leaders.begin(), leaders.end(), "vendor"), leaders.end())
      << "neither within 25% nor the fastest of its class";
  RefineOptions tight;
  tight.tile_margin = 0.2;
  const std::vector<std::string> near = Leaders(v, tight);
  EXPECT_EQ(std::find(near.begin(), near.end(), "atomic"), near.end())
      << "1.29x the winner is out of a 20% reach";
}

TEST(RefinementTest, LeadersByDefaultAreTheWinnerAndItsFiveClosestContenders) {
  // As on the H200: the bucket's winner and six others within the margin whose order
  // changes from shape to shape (cuBLASLt's heuristics, padded cuBLAS, wgmma).
  const Verdict v = BucketVerdict(
      {TimedResult("win", 10e-6), TimedResult("a", 9.0e-6), TimedResult("b", 10.2e-6),
       TimedResult("c", 10.4e-6), TimedResult("d", 10.6e-6), TimedResult("e", 10.8e-6),
       TimedResult("f", 11e-6), TimedResult("slow", 20e-6)},
      "win");
  EXPECT_EQ(Leaders(v, RefineOptions{}),
            (std::vector<std::string>{"win", "a", "b", "c", "d", "e"}));
}

std::vector<std::string> Names(const std::vector<TileEntrant>& entrants) {
  std::vector<std::string> out;
  for (const TileEntrant& e : entrants) out.push_back(e.name);
  return out;
}

TEST(RefinementTest, AWinnerWhoseTilesFillTheRefinedShapeWorseBringsInThoseItsMarginHid) {
  // The H200 case: wgmma_128x256 won the bucket at 256x14336x3584 (one wave of
  // exact tiles) by over the leaders' 25%, so it alone raced 136x8200x2056, where
  // its 128-row tiles waste 47% and fill half the SMs.
  Verdict v = BucketVerdict({TimedResult("wgmma_128x256", 30e-6), TimedResult("cublaslt_h0", 45e-6),
                             TimedResult("wgmma_64x256_splitk", 40e-6),
                             TimedResult("simt", 900e-6)},
                            "wgmma_128x256");
  v.dtype = DType::kBF16;
  v.measured = Problem{DType::kBF16, 256, 14336, 3584};
  const std::map<std::string, OutputTile> tiles = {
      {"wgmma_128x256", {.rows = 128, .cols = 256}},
      {"wgmma_64x256_splitk", {.rows = 64, .cols = 256, .max_split_k = 8}},
      {"simt", {.rows = 64, .cols = 64, .ctas_per_sm = 4}},
      {"cublaslt_h0", {}}};
  const RefineOptions options;
  const std::vector<std::string> leaders = Leaders(v, options);
  ASSERT_EQ(leaders, std::vector<std::string>{"wgmma_128x256"});
  const Problem here{DType::kBF16, 136, 8200, 2056};
  const std::vector<TileEntrant> entrants = TileEntrants(v, here, leaders, tiles, 132, options);
  EXPECT_EQ(Names(entrants), (std::vector<std::string>{"cublaslt_h0", "wgmma_64x256_splitk"}))
      << "cuBLASLt within the margin once the winner's waste here is counted, the split tile "
         "whose fill changes; never the far slower simt";
  for (const TileEntrant& e : entrants) EXPECT_FALSE(e.why.empty()) << e.name;
  // Where nothing's fill changes (the same rows, a wave either way), the margin holds as measured.
  EXPECT_TRUE(TileEntrants(v, Problem{DType::kBF16, 256, 14336, 2056}, leaders, tiles, 132, options)
                  .size() <= 1)
      << "at most the fastest of a tile shape other than the winner's";
}

TEST(RefinementTest, TheFastestOfEachTileShapeWithinTheMarginRacesUnknownTilesByMeasurementOnly) {
  // Nothing's fill changes between the shapes (same M, N multiples of every tile).
  Verdict v = BucketVerdict({TimedResult("vendor", 10e-6), TimedResult("a1", 14e-6),
                             TimedResult("a2", 15e-6), TimedResult("b", 19e-6),
                             TimedResult("other_vendor", 14e-6), TimedResult("c", 30e-6)},
                            "vendor");
  const std::map<std::string, OutputTile> tiles = {{"a1", {.rows = 16, .cols = 16}},
                                                   {"a2", {.rows = 16, .cols = 16}},
                                                   {"b", {.rows = 16, .cols = 32}},
                                                   {"c", {.rows = 32, .cols = 32}}};
  RefineOptions options;
  const std::vector<std::string> leaders = Leaders(v, options);
  ASSERT_EQ(leaders, std::vector<std::string>{"vendor"});
  const Problem here{DType::kF32, 64, 96, 64};
  EXPECT_EQ(Names(TileEntrants(v, here, leaders, tiles, 0, options)),
            (std::vector<std::string>{"a1", "b"}))
      << "a1 for 16x16 (not a2, slower with the same tile), b for 16x32; c is over 2x the "
         "fastest, other_vendor's tile is unknown";
  options.max_tile_entrants = 1;
  EXPECT_EQ(Names(TileEntrants(v, here, leaders, tiles, 0, options)),
            std::vector<std::string>{"a1"});
  options.max_tile_entrants = 0;
  EXPECT_TRUE(TileEntrants(v, here, leaders, tiles, 0, options).empty());
  EXPECT_TRUE(TileEntrants(v, here, leaders, {}, 0, RefineOptions{}).empty())
      << "no tile declared: the leaders alone, as before";
}

TEST(RefinementTest, AVendorHeuristicChosenPerShapeRacesWhileWithinReachOfTheFastest) {
  // The H200 case: at 64x18176x4544 cuBLASLt's heuristic rank 2 was over the
  // leaders' 25% behind wgmma_128x256, at 56x24584x6152 of the same bucket 4%
  // ahead of rank 0: a heuristic picks another kernel at each shape.
  Verdict v = BucketVerdict({TimedResult("wgmma_128x256", 65e-6), TimedResult("cublaslt_h0", 70e-6),
                             TimedResult("cublaslt_h2", 90e-6), TimedResult("cublaslt_h3", 140e-6),
                             TimedResult("simt", 900e-6)},
                            "wgmma_128x256");
  v.dtype = DType::kBF16;
  v.measured = Problem{DType::kBF16, 64, 18176, 4544};
  std::map<std::string, OutputTile> tiles = {{"wgmma_128x256", {.rows = 128, .cols = 256}},
                                             {"cublaslt_h0", {.per_shape = true}},
                                             {"cublaslt_h2", {.per_shape = true}},
                                             {"cublaslt_h3", {.per_shape = true}},
                                             {"simt", {.rows = 64, .cols = 64}}};
  const RefineOptions options;
  const std::vector<std::string> leaders = Leaders(v, options);
  ASSERT_EQ(leaders, (std::vector<std::string>{"wgmma_128x256", "cublaslt_h0"}));
  // Same fill for every declared tile (M and N multiples of both, no waves counted).
  const Problem here{DType::kBF16, 64, 24576, 6144};
  const std::vector<TileEntrant> entrants = TileEntrants(v, here, leaders, tiles, 0, options);
  EXPECT_EQ(Names(entrants), std::vector<std::string>{"cublaslt_h2"})
      << "h2 within 2x of the fastest; h3 (2.15x) and simt are out of reach";
  ASSERT_EQ(entrants.size(), 1u);
  EXPECT_NE(entrants[0].why.find("per shape"), std::string::npos) << entrants[0].why;
  tiles["cublaslt_h2"].per_shape = false;
  EXPECT_TRUE(TileEntrants(v, here, leaders, tiles, 0, options).empty())
      << "an unknown tile not declared per shape is judged by the leaders' margin alone";
}

TEST(RefinementTest, AShapeRefinedForTheFirstTimeIsServedByTheFastestThereEvenWithinTheNoise) {
  // At the refined shape `other` is 4% faster than the bucket's winner, within 2x
  // their 10% spread: the bucket's winner would stay as an incumbent, but it won at
  // another shape and is none here.
  std::vector<CandidateResult> here = {TimedResult("bucket_winner", 10.4e-6),
                                       TimedResult("other", 10e-6)};
  for (CandidateResult& r : here) r.spread = 0.10;
  const NoisePolicy noise;
  ASSERT_EQ(Decide(here, Determinism::kNondeterministic, "bucket_winner", noise).winner,
            "bucket_winner");
  const Decision d =
      DecideRefinement(here, Determinism::kNondeterministic, std::nullopt, "bucket_winner", noise);
  EXPECT_EQ(d.winner, "other");
  EXPECT_NE(d.reason.find("fastest at this shape"), std::string::npos) << d.reason;
  // Refined again: the earlier refinement's winner is an incumbent like any previous winner.
  EXPECT_EQ(DecideRefinement(here, Determinism::kNondeterministic, "bucket_winner", std::nullopt,
                             noise)
                .winner,
            "bucket_winner");
  // A required determinism filters first.
  here[1].determinism = Determinism::kNondeterministic;
  here[0].determinism = Determinism::kRunToRun;
  const std::optional<std::string> none;
  EXPECT_EQ(DecideRefinement(here, Determinism::kRunToRun, none, none, noise).winner,
            "bucket_winner");
  EXPECT_TRUE(
      DecideRefinement(here, Determinism::kBatchInvariant, none, none, noise).winner.empty());
}

TEST(RefinementTest, AFastestWhoseFiguresAreNoiseDoesNotDisplaceTheBucketsWinnerAtARefinement) {
  // On a loaded host: `scattered` reads 5x faster with samples spread wider than its
  // median (IQR 450%), the bucket's winner steadily.
  std::vector<CandidateResult> here = {TimedResult("bucket_winner", 2.7e-3),
                                       TimedResult("scattered", 0.59e-3)};
  here[1].spread = 4.5;
  const Decision d = DecideRefinement(here, Determinism::kNondeterministic, std::nullopt,
                                      "bucket_winner", NoisePolicy{});
  EXPECT_EQ(d.winner, "bucket_winner");
  EXPECT_NE(d.reason.find("noise"), std::string::npos) << d.reason;
  here[1].spread = 0.5;  // scattered, but its median still means something
  EXPECT_EQ(DecideRefinement(here, Determinism::kNondeterministic, std::nullopt, "bucket_winner",
                             NoisePolicy{})
                .winner,
            "scattered");
}

// A candidate timed in rounds 0.. of `samples`, its figures taken from them.
CandidateResult TimedIn(RaceSamples& samples, const std::string& name,
                        const std::vector<double>& seconds) {
  for (size_t i = 0; i < seconds.size(); ++i) samples.Add(name, static_cast<int>(i), seconds[i]);
  CandidateResult r = TimedResult(name, Summarize(seconds).median);
  r.samples = static_cast<int>(seconds.size());
  return r;
}

TEST(RefinementTest, ARefinementsPickIsUnsettledWhileItsRoundsNeitherOrderNorTieTheTopTwo) {
  const NoisePolicy noise;
  // `b` 5% faster in 6 rounds of 10 and 5% slower in 4: the 95% bounds hold 1 and
  // reach past 2% either side - which of the two is faster, 10 rounds do not say.
  const auto pick = [&](const std::vector<double>& b, int rounds) {
    RaceSamples samples;
    std::vector<CandidateResult> r = {
        TimedIn(samples, "a", std::vector<double>(rounds, 10e-6)), TimedIn(samples, "b", b),
        TimedIn(samples, "slow", std::vector<double>(rounds, 20e-6))};
    return UnsettledPick(r, Determinism::kNondeterministic, noise, samples);
  };
  std::vector<double> mixed;
  for (int i = 0; i < 10; ++i) mixed.push_back(i % 5 < 3 ? 9.5e-6 : 10.5e-6);
  EXPECT_EQ(pick(mixed, 10), (std::vector<std::string>{"b", "a"}));
  EXPECT_TRUE(pick(std::vector<double>(10, 9.6e-6), 10).empty())
      << "4% faster in every round: ordered";
  EXPECT_TRUE(pick(std::vector<double>(10, 10.1e-6), 10).empty())
      << "1% apart in every round: ordered, and a tie within the noise besides";
  std::vector<double> close;
  for (int i = 0; i < 10; ++i) close.push_back(i % 2 == 0 ? 9.9e-6 : 10.1e-6);
  EXPECT_TRUE(pick(close, 10).empty()) << "within 2% either way: either one serves as well";
  mixed.resize(4);
  EXPECT_TRUE(pick(mixed, 4).empty()) << "fewer rounds than min_pairs: nothing paired to extend";
}

TEST(RefinementTest, TheMostSpecificVerdictServesAShape) {
  Verdict v = BucketVerdict({TimedResult("win", 10e-6)}, "win");
  Verdict exact = v;
  exact.scope = VerdictScope::Shape(Problem{DType::kF32, 40, 48, 56});
  exact.winner = "exact";
  Verdict low = v, high = v;
  low.scope = VerdictScope::Half('m', 32, 48);
  low.winner = "low";
  high.scope = VerdictScope::Half('m', 48, 64);
  high.winner = "high";
  v.scoped = {exact, low, high};
  EXPECT_EQ(MostSpecific(v, Problem{DType::kF32, 40, 48, 56})->winner, "exact");
  EXPECT_EQ(MostSpecific(v, Problem{DType::kF32, 40, 48, 64})->winner, "low");
  EXPECT_EQ(MostSpecific(v, Problem{DType::kF32, 48, 48, 56})->winner, "low");  // (32,48]
  EXPECT_EQ(MostSpecific(v, Problem{DType::kF32, 56, 48, 56})->winner, "high");
  v.scoped = {exact};
  EXPECT_EQ(MostSpecific(v, Problem{DType::kF32, 56, 48, 56})->winner, "win");
  EXPECT_TRUE(RefinementOf(v, Problem{DType::kF32, 40, 48, 56}) != nullptr);
  EXPECT_FALSE(IsSplit(v));
}

TEST(RefinementTest, EveryShapeOfASplitBucketIsInExactlyOneHalf) {
  const Problem measured{DType::kF32, 64, 64, 64};
  const Problem refined{DType::kF32, 40, 56, 64};  // m differs more than n
  const Bucket b = BucketOf(measured);
  const auto halves = SplitBetween(b, measured, refined);
  ASSERT_TRUE(halves.has_value());
  EXPECT_EQ(halves->first.dim, 'm');
  EXPECT_TRUE(halves->first.Contains(refined));
  EXPECT_TRUE(halves->second.Contains(measured));
  for (int64_t m = 33; m <= 64; ++m) {
    const Problem p{DType::kF32, m, 64, 64};
    if (BucketOf(p) != b) continue;
    EXPECT_NE(halves->first.Contains(p), halves->second.Contains(p)) << m;
  }
}

TEST(RefinementTest, NoSplitWhereNoDimensionSeparatesTheShapesOrAHalfWouldBeEmpty) {
  const Problem measured{DType::kF32, 64, 64, 64};
  // Same half-octave on every dimension: (48, 64].
  EXPECT_FALSE(SplitBetween(BucketOf(measured), measured, Problem{DType::kF32, 56, 56, 56}));
  // (4, 8] at alignment 8 holds only 8: nothing to split.
  const Problem tiny{DType::kF32, 8, 8, 8};
  EXPECT_FALSE(SplitBetween(BucketOf(tiny), tiny, tiny));
}

TEST(RefinementTest, TransferComparesTheBucketWinnerWithTheBestAtTheShape) {
  Verdict refined = BucketVerdict({TimedResult("bucket_win", 11.3e-6), TimedResult("local", 10e-6)},
                                  "local");
  const Transfer t = TransferOf(refined, "bucket_win");
  EXPECT_EQ(t.best, "local");
  EXPECT_NEAR(t.regret(), 1.13, 1e-9);
  EXPECT_EQ(TransferOf(refined, "absent").regret(), 0.0);  // not timed there: unknown
}

TEST(RefinementTest, ScopesRoundTripThroughTheirText) {
  for (const VerdictScope& s : {VerdictScope{}, VerdictScope::Shape(Problem{DType::kF32, 40, 48, 56}),
                                VerdictScope::Half('k', 2048, 3072)}) {
    const std::optional<VerdictScope> back = VerdictScope::Parse(s.ToString());
    ASSERT_TRUE(back.has_value()) << s.ToString();
    EXPECT_EQ(*back, s) << s.ToString();
  }
  EXPECT_EQ(VerdictScope::Shape(Problem{DType::kF32, 40, 48, 56}).ToString(), "40x48x56");
  EXPECT_EQ(VerdictScope::Half('k', 2048, 3072).ToString(), "k(2048,3072]");
  for (const char* bad : {"40x48", "x(1,2]", "m(4,2]", "40x48x0", "m(1,2"}) {
    EXPECT_FALSE(VerdictScope::Parse(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace arbiter
