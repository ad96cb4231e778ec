// The Arbiter's refinements and splits (refinement.h decides, the Tuner measures):
// a shape inside a measured bucket gets a verdict of its own, raced among the
// bucket verdict's leaders and tile entrants; a bucket splits where one beats its
// winner beyond the noise; both are kept, listed, invalidated and served like any
// verdict.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/arbiter.h"
#include "gtest/gtest.h"
#include "tests/engine/arbiter_fixture.h"
#include "tests/engine/fake_backend.h"

namespace arbiter {
namespace {

using testing::ArbiterTest;
using testing::FakeCandidate;
using testing::FakeStream;
using testing::NaiveGemm;
using testing::OutageStore;
using testing::ShapedKernel;
using testing::SlowInSomeRuns;
using testing::TimedKernel;

// Refinement and splits. Bucket m(32,64]a8.n(32,64]a8.k(32,64]a8, measured at 64^3:
// `wide` is fastest where M > 48, `narrow` (within the leaders' margin there) where
// M <= 48, `generic` is far slower everywhere and never a leader.
std::vector<CandidateSpec> Shaped() {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("wide", 3, ShapedKernel([](const Problem&) { return 10e-6; })));
  c.push_back(FakeCandidate("narrow", 2, ShapedKernel([](const Problem& p) {
    return p.m <= 48 ? 8e-6 : 11e-6;
  })));
  c.push_back(FakeCandidate("generic", 1, TimedKernel(100e-6)));
  return c;
}
const Problem kBucketShape{DType::kF32, 64, 64, 64};
const Problem kNarrowShape{DType::kF32, 40, 64, 64};

// The verdicts listed for kBucketShape's bucket, by scope text.
std::map<std::string, Verdict> Listed(Arbiter& arbiter) {
  VerdictFilter filter;
  filter.bucket = BucketOf(kBucketShape);
  absl::StatusOr<std::vector<Verdict>> all = arbiter.ListVerdicts(filter);
  EXPECT_TRUE(all.ok()) << all.status();
  std::map<std::string, Verdict> out;
  if (all.ok()) {
    for (const Verdict& v : *all) out[v.scope.ToString()] = v;
  }
  return out;
}

TEST_F(ArbiterTest, TuneOfAShapeInsideAMeasuredBucketGivesItAVerdictOfItsOwn) {
  auto arbiter = Start(Shaped());
  ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
  absl::StatusOr<Verdict> refined = arbiter->Tune(kNarrowShape);
  ASSERT_TRUE(refined.ok()) << refined.status();
  EXPECT_EQ(refined->scope, VerdictScope::Shape(kNarrowShape));
  EXPECT_EQ(refined->measured, kNarrowShape);
  // Every eligible candidate is accounted for; the far slower one was not raced.
  ASSERT_EQ(refined->results.size(), 3u);
  EXPECT_EQ(refined->Result("generic")->state, ResultState::kUnmeasured);
  EXPECT_NE(refined->Result("generic")->reason.find("not a leader"), std::string::npos);
  EXPECT_TRUE(refined->Result("wide")->timed());
  EXPECT_TRUE(refined->Result("narrow")->timed());

  const std::map<std::string, Verdict> listed = Listed(*arbiter);
  ASSERT_TRUE(listed.count("")) << "the bucket's own verdict";
  ASSERT_TRUE(listed.count("40x64x64")) << "the refinement beside it";
  // Transfer: the bucket's winner, timed at the refined shape, against the best there.
  const Verdict& at = listed.at("40x64x64");
  ASSERT_TRUE(at.transfer.has_value());
  EXPECT_EQ(at.transfer->bucket_winner, listed.at("").winner);
  EXPECT_EQ(at.transfer->bucket_winner_seconds,
            at.Result(listed.at("").winner)->median_seconds);
  EXPECT_GE(at.transfer->regret(), 1.0);

  // The refinement serves its shape; the bucket's verdict still serves the rest.
  auto s = arbiter->Select(kNarrowShape, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kMeasured);
  EXPECT_EQ(s->candidate, refined->winner);
  auto b = arbiter->Select(kBucketShape, {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->candidate, listed.at("").winner);
}

TEST_F(ArbiterTest, ABucketSplitsWhereARefinementBeatsItsWinnerAndEveryShapeFindsItsHalf) {
  auto arbiter = Start(Shaped());
  ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
  absl::StatusOr<Verdict> refined = arbiter->Tune(kNarrowShape);
  ASSERT_TRUE(refined.ok()) << refined.status();
  const std::map<std::string, Verdict> listed = Listed(*arbiter);
  ASSERT_NE(refined->winner, listed.at("").winner) << "the planted timings disagree inside the bucket";
  ASSERT_TRUE(listed.count("m(32,48]") && listed.count("m(48,64]"))
      << "split on M into half-octaves";
  EXPECT_NE(listed.at("m(32,48]").reason.find("split"), std::string::npos);
  EXPECT_EQ(arbiter->measurements(), 2)
      << "the bucket's race and the refinement's, which the half away from 64^3 takes: the "
         "refined shape is not raced twice";
  EXPECT_EQ(listed.at("m(32,48]").measured, kNarrowShape);
  // Every shape of the bucket is served by the verdict of the half holding it.
  for (int64_t m : {40, 48, 56, 64}) {
    for (int64_t n : {40, 64}) {
      const Problem q{DType::kF32, m, n, 56};
      ASSERT_EQ(BucketOf(q), BucketOf(kBucketShape));
      const Verdict& half = listed.at(m <= 48 ? "m(32,48]" : "m(48,64]");
      SelectOptions off;
      off.tuning = TuningPolicy::kOff;
      auto s = arbiter->Select(q, off);
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->source, VerdictSource::kMeasured) << q.ToString();
      EXPECT_EQ(s->candidate, half.winner) << q.ToString();
    }
  }
}

TEST_F(ArbiterTest, RestartKeepsRefinementsAndSplitsWithoutMeasuringAgain) {
  std::map<std::string, std::string> served;
  const std::vector<Problem> shapes = {kNarrowShape, {DType::kF32, 48, 64, 64},
                                       {DType::kF32, 56, 40, 64}, kBucketShape};
  {
    auto arbiter = Start(Shaped());
    ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
    ASSERT_TRUE(arbiter->Tune(kNarrowShape).ok());
    ASSERT_EQ(Listed(*arbiter).size(), 4u);  // bucket, refinement, two halves
    for (const Problem& q : shapes) served[q.ToString()] = arbiter->Select(q, {})->candidate;
  }
  options_.tuning = TuningPolicy::kOff;
  auto arbiter = Start(Shaped());
  EXPECT_EQ(Listed(*arbiter).size(), 4u);
  for (const Problem& q : shapes) {
    auto s = arbiter->Select(q, {});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->source, VerdictSource::kMeasured) << q.ToString();
    EXPECT_EQ(s->candidate, served[q.ToString()]) << q.ToString();
  }
  EXPECT_EQ(arbiter->measurements(), 0);
}

TEST_F(ArbiterTest, InvalidatingABucketRemovesItsRefinementsAndSplits) {
  auto arbiter = Start(Shaped());
  ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
  ASSERT_TRUE(arbiter->Tune(kNarrowShape).ok());
  ASSERT_GT(Listed(*arbiter).size(), 1u);
  InvalidateScope scope;
  scope.bucket = BucketOf(kBucketShape);
  ASSERT_TRUE(arbiter->Invalidate(scope).ok());
  EXPECT_TRUE(Listed(*arbiter).empty());
  SelectOptions off;
  off.tuning = TuningPolicy::kOff;
  EXPECT_EQ(arbiter->Select(kNarrowShape, off)->source, VerdictSource::kTierDefault);
}

TEST_F(ArbiterTest, AShapeServedOftenFromAnotherShapesFiguresIsRefinedInTheBackground) {
  options_.refine.hot_after = 3;
  auto arbiter = Start(Shaped());
  ASSERT_TRUE(arbiter->Select(kBucketShape, {}).ok());  // measures the bucket at 64^3
  for (int i = 0; i < 3; ++i) {
    auto s = arbiter->Select(kNarrowShape, {});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->verdict->measured, kBucketShape);  // answered at once from the bucket's
  }
  arbiter->WaitIdle();
  EXPECT_TRUE(Listed(*arbiter).count("40x64x64"));
  auto s = arbiter->SelectShared(kNarrowShape, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->verdict->measured, kNarrowShape);
  // Refined, the answer is remembered like any other.
  auto again = arbiter->SelectShared(kNarrowShape, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->get(), s->get());
}

TEST_F(ArbiterTest, AShapeWhoseRefinementWasInvalidatedIsRefinedAgainOnceHotAgain) {
  options_.refine.hot_after = 3;
  auto arbiter = Start(Shaped());
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(arbiter->Select(kBucketShape, {}).ok());  // measures the bucket at 64^3
    for (int i = 0; i < 3; ++i) {
      auto s = arbiter->Select(kNarrowShape, {});
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->verdict->measured, kBucketShape) << "round " << round;
    }
    arbiter->WaitIdle();
    ASSERT_TRUE(Listed(*arbiter).count("40x64x64")) << "round " << round << ": refined when hot";
    // The operator drops the bucket with its refinement: the shape must be able to earn it again.
    InvalidateScope scope;
    scope.bucket = BucketOf(kBucketShape);
    ASSERT_TRUE(arbiter->Invalidate(scope).ok());
    ASSERT_TRUE(Listed(*arbiter).empty());
  }
}

TEST_F(ArbiterTest, AHotShapeWhoseBackgroundRefinementFailedIsRefinedOnceHotAgain) {
  options_.refine.hot_after = 3;
  options_.selection_cache_entries = 0;  // no answer remembered: every use is counted
  auto sqlite = VerdictStore::Open((dir_ / "verdicts.db").string());
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  auto owned = std::make_unique<OutageStore>(std::move(*sqlite));
  OutageStore* store = owned.get();
  auto arbiter = Start(Shaped(), std::move(owned));
  ASSERT_TRUE(arbiter->Select(kBucketShape, {}).ok());  // measures the bucket at 64^3
  for (bool refuse : {true, false}) {
    // First the store refuses the refinement's verdict, so the refinement fails; then
    // it takes it, and the shape, hot again, must be refined then.
    store->set_refuse_verdicts(refuse);
    for (int i = 0; i < 3; ++i) {
      auto s = arbiter->Select(kNarrowShape, {});
      ASSERT_TRUE(s.ok()) << s.status();
      ASSERT_EQ(s->verdict->measured, kBucketShape) << "refuse " << refuse;
    }
    arbiter->WaitIdle();
    EXPECT_EQ(Listed(*arbiter).count("40x64x64"), refuse ? 0u : 1u)
        << (refuse ? "the store refused it" : "refined once hot again after the failure");
  }
}

// A kernel taking seconds(problem) times 0.95, 1 and 1.05 in turn (1.05, 1
// and 0.95 where `reversed`): a spread of about 10% around a median of
// seconds(problem). Two kernels, one reversed, raced together wobble out of
// step whatever their call counts: noise of their own, not common to a round
// (which a decision on the per-round ratios sees through).
KernelFn NoisyShapedKernel(std::function<double(const Problem&)> seconds, bool reversed = false) {
  auto calls = std::make_shared<int>(0);
  return [=](const GemmArgs& args) {
    NaiveGemm(args, args.problem.k, args.problem.m);
    static constexpr double kWobble[] = {0.95, 1.0, 1.05};
    const int i = (*calls)++ % 3;
    static_cast<FakeStream*>(args.stream)->Advance(seconds(args.problem) *
                                                   kWobble[reversed ? 2 - i : i]);
    return absl::OkStatus();
  };
}

TEST_F(ArbiterTest, ARefinedShapeIsServedByTheFastestThereThoughWithinTheNoiseOfTheBucketsWinner) {
  // `vendor` (tier 3) wins the bucket at 64^3; at 40x64x64 `other` is 1.5% faster
  // by median, each wobbling 10% out of step with the other, so the per-round
  // ratios spread about 10% too and their median stays short of the 2% a split
  // needs (so no extra rounds either), but the shape's own verdict is served by
  // the faster there.
  const auto at = [](double bucket, double narrow) {
    return [=](const Problem& p) { return p.m <= 48 ? narrow : bucket; };
  };
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("vendor", 3, NoisyShapedKernel(at(10e-6, 10.15e-6))));
  c.push_back(FakeCandidate("other", 2, NoisyShapedKernel(at(10.4e-6, 10e-6), /*reversed=*/true)));
  auto arbiter = Start(std::move(c));
  ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
  ASSERT_EQ(Listed(*arbiter).at("").winner, "vendor");
  absl::StatusOr<Verdict> refined = arbiter->Tune(kNarrowShape);
  ASSERT_TRUE(refined.ok()) << refined.status();
  ASSERT_GT(refined->Result("other")->spread, 0.02) << "the noise the test means to plant";
  EXPECT_EQ(refined->winner, "other") << refined->reason;
  auto s = arbiter->Select(kNarrowShape, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->candidate, "other") << s->reason;
  const std::map<std::string, Verdict> listed = Listed(*arbiter);
  EXPECT_EQ(listed.size(), 2u) << "the bucket and the refinement: within the noise, no split";
  EXPECT_EQ(arbiter->Select(kBucketShape, {})->candidate, "vendor");
}


TEST_F(ArbiterTest, ARefinementFasterInEveryRoundSplitsTheBucketThoughEachOnesSpreadIsHuge) {
  // `vendor` (tier 3) wins the bucket at 64^3, `other` 20% behind; at 40x64x64
  // `other` takes 10/13 of vendor's time in every round, while each one's samples
  // scatter by about 100% (a factor the round's samples share).
  const auto at = [](double bucket, double narrow) {
    return [=](const Problem& p) { return p.m <= 48 ? narrow : bucket; };
  };
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("vendor", 3, testing::RoundScatteredKernel(at(10e-6, 13e-6))));
  c.push_back(FakeCandidate("other", 2, testing::RoundScatteredKernel(at(12e-6, 10e-6))));
  auto arbiter = Start(std::move(c));
  ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
  ASSERT_EQ(Listed(*arbiter).at("").winner, "vendor");
  absl::StatusOr<Verdict> refined = arbiter->Tune(kNarrowShape);
  ASSERT_TRUE(refined.ok()) << refined.status();
  ASSERT_GT(refined->Result("vendor")->spread, 0.5) << *refined;
  EXPECT_EQ(refined->winner, "other") << refined->reason;
  EXPECT_NE(refined->reason.find("against the bucket's winner: fastest in budget"),
            std::string::npos)
      << refined->reason;
  const std::map<std::string, Verdict> listed = Listed(*arbiter);
  EXPECT_TRUE(listed.count("m(32,48]") && listed.count("m(48,64]"))
      << "beyond the noise round by round: the bucket splits on M";
}

TEST_F(ArbiterTest, ARememberedAnswerGivesWayToTheRefinementAndTheSplitHalfThatNowServeItsShape) {
  options_.refine.hot_after = 0;  // only tune refines: answers are remembered from the first
  auto arbiter = Start(Shaped());
  ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
  const Problem other{DType::kF32, 48, 40, 56};  // M <= 48 too, but not the shape tune names
  ASSERT_EQ(BucketOf(other), BucketOf(kBucketShape));
  std::map<std::string, std::shared_ptr<const Selection>> before;
  for (const Problem& q : {kNarrowShape, other, kBucketShape}) {
    auto first = arbiter->SelectShared(q, {});
    auto second = arbiter->SelectShared(q, {});
    ASSERT_TRUE(first.ok() && second.ok()) << q.ToString();
    ASSERT_EQ(first->get(), second->get()) << q.ToString() << ": remembered";
    ASSERT_EQ((*second)->verdict->measured, kBucketShape) << q.ToString();
    before[q.ToString()] = *second;
  }
  ASSERT_EQ(before.at(kNarrowShape.ToString())->candidate, "wide");

  ASSERT_TRUE(arbiter->Tune(kNarrowShape).ok());  // refines 40x64x64; the bucket splits on M
  const std::map<std::string, Verdict> listed = Listed(*arbiter);
  ASSERT_TRUE(listed.count("40x64x64") && listed.count("m(32,48]") && listed.count("m(48,64]"));
  // Each shape is now served by its most specific verdict, not the answer remembered before.
  const std::vector<std::pair<Problem, VerdictScope>> want = {
      {kNarrowShape, VerdictScope::Shape(kNarrowShape)},
      {other, VerdictScope::Half('m', 32, 48)},
      {kBucketShape, VerdictScope::Half('m', 48, 64)}};
  for (const auto& [q, scope] : want) {
    for (int i = 0; i < 2; ++i) {  // decided, then remembered
      auto s = arbiter->SelectShared(q, {});
      ASSERT_TRUE(s.ok()) << s.status();
      ASSERT_TRUE((*s)->verdict.has_value()) << q.ToString();
      EXPECT_EQ((*s)->verdict->scope, scope) << q.ToString() << ": " << (*s)->reason;
      EXPECT_EQ((*s)->candidate, listed.at(scope.ToString()).winner) << q.ToString();
      EXPECT_NE(s->get(), before.at(q.ToString()).get()) << q.ToString();
    }
  }
  EXPECT_EQ(arbiter->SelectShared(kNarrowShape, {})->get()->candidate, "narrow");
  EXPECT_EQ(arbiter->SelectShared(other, {})->get()->candidate, "narrow");
}

CandidateSpec WithTile(CandidateSpec spec, OutputTile tile) {
  for (CandidateMember& m : spec.members) m.contract.tile = tile;
  return spec;
}

TEST_F(ArbiterTest, ARefinementRacesTheCandidatesWhoseTilesFillItsShapeDifferently) {
  // As on the H200 at 136x8200x2056 in the bucket measured at 256x14336x3584:
  // `rows128`, 128-row tiles, wins at 256 rows by more than the leaders' margin
  // and alone would race 136 rows, where it computes 256 all the same. `vendor`
  // (tile unknown) and `rows64` (64-row tiles: 192 rows computed) are faster there.
  const auto tiles_of = [](int64_t rows, int64_t m) { return double((m + rows - 1) / rows); };
  std::vector<CandidateSpec> c;
  c.push_back(WithTile(FakeCandidate("rows128", 3, ShapedKernel([=](const Problem& p) {
                         return 5e-6 * tiles_of(128, p.m);
                       })),
                       {.rows = 128, .cols = 64}));
  c.push_back(FakeCandidate("vendor", 3, ShapedKernel([](const Problem& p) {
    return 14e-6 * double(p.m) / 256;
  })));
  c.push_back(WithTile(FakeCandidate("rows64", 2, ShapedKernel([=](const Problem& p) {
                         return 3.25e-6 * tiles_of(64, p.m);
                       })),
                       {.rows = 64, .cols = 64}));
  c.push_back(FakeCandidate("generic", 1, TimedKernel(100e-6)));
  auto arbiter = Start(std::move(c));
  const Problem measured{DType::kF32, 256, 64, 64}, here{DType::kF32, 136, 64, 64};
  ASSERT_EQ(BucketOf(measured), BucketOf(here));
  absl::StatusOr<Verdict> bucket = arbiter->Tune(measured);
  ASSERT_TRUE(bucket.ok()) << bucket.status();
  ASSERT_EQ(bucket->winner, "rows128") << "10us against 13us and 14us: beyond the leaders' 25%";

  absl::StatusOr<Verdict> refined = arbiter->Tune(here);
  ASSERT_TRUE(refined.ok()) << refined.status();
  EXPECT_TRUE(refined->Result("vendor")->timed()) << refined->reason;
  EXPECT_TRUE(refined->Result("rows64")->timed()) << refined->reason;
  EXPECT_EQ(refined->Result("generic")->state, ResultState::kUnmeasured);
  EXPECT_NE(refined->reason.find("by tile"), std::string::npos) << refined->reason;
  EXPECT_EQ(refined->winner, "vendor") << refined->reason;
  auto s = arbiter->Select(here, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->candidate, "vendor") << s->reason;
}

TEST_F(ArbiterTest, RefinementNeverServesACandidateOutsideItsCoverageOrBelowTheRequiredDeterminism) {
  // `capped` is the fastest where it runs, but covers M <= 48 only; `loose` is
  // fast and nondeterministic.
  std::vector<CandidateSpec> c = Shaped();
  CandidateSpec capped = FakeCandidate("capped", 3, TimedKernel(1e-6));
  for (auto& m : capped.members) m.contract.shape.max_m = 48;
  c.push_back(std::move(capped));
  c.push_back(FakeCandidate("loose", 3, TimedKernel(2e-6), Determinism::kNondeterministic));
  auto arbiter = Start(std::move(c));
  ASSERT_TRUE(arbiter->Tune(kNarrowShape).ok());  // capped covers 40: raced there
  for (const Problem& q : {kBucketShape, Problem{DType::kF32, 56, 64, 64}}) {
    absl::StatusOr<Verdict> v = arbiter->Tune(q);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->Result("capped"), nullptr) << q.ToString() << ": not eligible, not listed";
    auto s = arbiter->Select(q, {});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_NE(s->candidate, "capped") << q.ToString();
    SelectOptions strict;
    strict.required = Determinism::kRunToRun;
    auto t = arbiter->Select(q, strict);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_NE(t->candidate, "loose") << q.ToString();
    EXPECT_NE(t->candidate, "capped") << q.ToString();
  }
}

TEST_F(ArbiterTest, ARefinementRacesTheFastestNondeterministicCandidateForRequestsThatAllowIt) {
  // As split-K on the H200 (16x16xK): `ordered` (run_to_run) wins the bucket at
  // 64^3, where `atomic` (nondeterministic) takes 1.3x its time - outside the
  // leaders' 25% - but at 40x64x64 `atomic` is the faster.
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("ordered", 3, ShapedKernel([](const Problem&) { return 10e-6; })));
  c.push_back(FakeCandidate("atomic", 2, ShapedKernel([](const Problem& p) {
    return p.m <= 48 ? 8e-6 : 13e-6;
  }), Determinism::kNondeterministic));
  c.push_back(FakeCandidate("generic", 1, TimedKernel(100e-6)));
  auto arbiter = Start(std::move(c));
  ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
  ASSERT_EQ(Listed(*arbiter).at("").winner, "ordered");
  absl::StatusOr<Verdict> refined = arbiter->Tune(kNarrowShape);
  ASSERT_TRUE(refined.ok()) << refined.status();
  ASSERT_NE(refined->Result("atomic"), nullptr);
  EXPECT_TRUE(refined->Result("atomic")->timed()) << refined->reason;
  auto loose = arbiter->Select(kNarrowShape, {});
  ASSERT_TRUE(loose.ok()) << loose.status();
  EXPECT_EQ(loose->candidate, "atomic") << loose->reason;
  SelectOptions strict;
  strict.required = Determinism::kRunToRun;
  auto exact = arbiter->Select(kNarrowShape, strict);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->candidate, "ordered") << "never served where determinism is required";
}

// Close races. `vendor` (tier 3, the incumbent) takes 10us; `ours` 4% less but
// level with it in the rounds `level` names (of every 10): with 2 of 10 level,
// 10 rounds cannot separate it (the sign test's bound is then the 2nd smallest
// ratio, 1.0) but 12 can (the 3rd); with 4 of 10 level, no number of rounds can.
std::vector<CandidateSpec> Close(std::vector<int> level, double ours_at_bucket = 9.6e-6) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("vendor", 3, ShapedKernel([](const Problem&) { return 10e-6; })));
  c.push_back(FakeCandidate("ours", 2,
                            SlowInSomeRuns([=](const Problem& p) {
                              return p.m <= 48 ? 9.6e-6 : ours_at_bucket;
                            }, 10.0 / 9.6, std::move(level))));
  return c;
}

TEST_F(ArbiterTest, AChallengerTenRoundsCannotSeparateButMoreCanWinsAfterMoreRounds) {
  options_.measure.min_samples = options_.measure.max_samples = 10;
  for (double extend : {0.0, 1.0}) {
    options_.measure.extend_rounds = extend;
    std::filesystem::remove_all(dir_);  // a fresh store each time
    std::filesystem::create_directories(dir_);
    auto arbiter = Start(Close({3, 7}));
    absl::StatusOr<Verdict> v = arbiter->Tune(p_);
    ASSERT_TRUE(v.ok()) << v.status();
    if (extend == 0) {
      EXPECT_EQ(v->winner, "vendor") << "10 rounds alone do not separate it: " << v->reason;
      EXPECT_NE(v->reason.find("not separated"), std::string::npos) << v->reason;
      continue;
    }
    EXPECT_EQ(v->winner, "ours") << v->reason;
    EXPECT_NE(v->reason.find("close race: vendor and ours timed"), std::string::npos) << v->reason;
    EXPECT_NE(v->reason.find("settled"), std::string::npos) << v->reason;
    EXPECT_GT(v->Result("ours")->samples, 10) << v->reason;
    EXPECT_LE(v->Result("ours")->samples, 20) << "at most twice the rounds";
  }
}

TEST_F(ArbiterTest, AChallengerMoreRoundsCannotSeparateLeavesTheIncumbent) {
  // Ahead by median, level in 4 rounds of every 10: a coin flip, however long.
  options_.measure.min_samples = options_.measure.max_samples = 10;
  auto arbiter = Start(Close({2, 4, 6, 8}));
  absl::StatusOr<Verdict> v = arbiter->Tune(p_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->winner, "vendor") << v->reason;
  EXPECT_NE(v->reason.find("not separated"), std::string::npos) << v->reason;
  EXPECT_NE(v->reason.find("close race: vendor and ours timed 40 more paired rounds"),
            std::string::npos)
      << v->reason;
  EXPECT_EQ(v->Result("ours")->samples, 50) << "five times the rounds (the default), and no more";
}

TEST_F(ArbiterTest, ACloseRefinementThatMoreRoundsSeparateSplitsTheBucket) {
  // `vendor` wins the bucket at 64^3 (`ours` 12us there); at 40x64x64 `ours` is
  // close: 10 rounds leave the bucket whole, more split it.
  options_.measure.min_samples = options_.measure.max_samples = 10;
  for (double extend : {0.0, 1.0}) {
    options_.measure.extend_rounds = extend;
    std::filesystem::remove_all(dir_);  // a fresh store each time
    std::filesystem::create_directories(dir_);
    auto arbiter = Start(Close({3, 7}, /*ours_at_bucket=*/12e-6));
    ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
    ASSERT_EQ(Listed(*arbiter).at("").winner, "vendor");
    absl::StatusOr<Verdict> refined = arbiter->Tune(kNarrowShape);
    ASSERT_TRUE(refined.ok()) << refined.status();
    EXPECT_EQ(refined->winner, "ours") << "the fastest serves its refined shape: " << refined->reason;
    EXPECT_LE(refined->cost.device, options_.refine.device_budget_seconds);
    const std::map<std::string, Verdict> listed = Listed(*arbiter);
    if (extend == 0) {
      EXPECT_EQ(listed.size(), 2u) << "not separated in 10 rounds: the bucket stays whole";
    } else {
      EXPECT_TRUE(listed.count("m(32,48]") && listed.count("m(48,64]"))
          << "separated after more rounds: the bucket splits. " << refined->reason;
      EXPECT_NE(refined->reason.find("close race: vendor and ours timed"), std::string::npos)
          << refined->reason;
    }
  }
}

TEST_F(ArbiterTest, ARefinementWhoseTopTwoItsRoundsCannotOrderTimesThemFurther) {
  // As cuBLASLt h0 and h2 at 1032x2056x2056 on the H200: at 40x64x64, neither the
  // bucket's winner `vendor` (20us there), `even` takes 10us and `late` 9.5us, but
  // 10.5us in 6 of its first 10 timed runs there, so 10 rounds put `even` first by
  // median and leave the two unordered; more rounds find `late` the faster.
  options_.measure.min_samples = options_.measure.max_samples = 10;
  for (double extend : {0.0, 4.0}) {
    options_.measure.extend_rounds = extend;
    std::filesystem::remove_all(dir_);  // a fresh store each time
    std::filesystem::create_directories(dir_);
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("vendor", 3, ShapedKernel([](const Problem& p) {
      return p.m <= 48 ? 20e-6 : 10e-6;
    })));
    c.push_back(FakeCandidate("even", 2, ShapedKernel([](const Problem& p) {
      return p.m <= 48 ? 10e-6 : 11e-6;
    })));
    auto runs = std::make_shared<int>(0);
    c.push_back(FakeCandidate("late", 2, [runs](const GemmArgs& args) {
      NaiveGemm(args, args.problem.k, args.problem.m);
      auto* stream = static_cast<FakeStream*>(args.stream);
      double seconds = 11.5e-6;
      if (args.problem.m <= 48) {
        seconds = 9.5e-6;
        // The oracle's run is timed too: runs 0-6 are it and the first 6 samples.
        if (stream->timer_running() && (*runs)++ < 7) seconds = 10.5e-6;
      }
      stream->Advance(seconds);
      return absl::OkStatus();
    }));
    auto arbiter = Start(std::move(c));
    ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
    ASSERT_EQ(Listed(*arbiter).at("").winner, "vendor");
    absl::StatusOr<Verdict> refined = arbiter->Tune(kNarrowShape);
    ASSERT_TRUE(refined.ok()) << refined.status();
    if (extend == 0) {
      EXPECT_EQ(refined->winner, "even") << "10 rounds alone: " << refined->reason;
      continue;
    }
    EXPECT_EQ(refined->winner, "late") << refined->reason;
    EXPECT_NE(refined->reason.find("close race: even and late timed"), std::string::npos)
        << refined->reason;
    EXPECT_LE(refined->cost.device, options_.refine.device_budget_seconds);
    auto s = arbiter->Select(kNarrowShape, {});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->candidate, "late") << s->reason;
  }
}

TEST_F(ArbiterTest, ARefinementWhoseRoundsWouldSpendItsBudgetLeavesSomeToItsCloseRace) {
  // `vendor` is stable after its 10 samples and stops; `ours`, level with it in 4
  // rounds of 10, is not and would sample alone until the budget (0.5ms) is
  // spent, leaving their close race no round. A third of the budget is kept for it.
  options_.measure.min_samples = 10;
  options_.measure.max_samples = 100;
  options_.refine.device_budget_seconds = 0.5e-3;
  auto arbiter = Start(Close({2, 4, 6, 8}, /*ours_at_bucket=*/12e-6));
  ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
  absl::StatusOr<Verdict> refined = arbiter->Tune(kNarrowShape);
  ASSERT_TRUE(refined.ok()) << refined.status();
  EXPECT_LE(refined->cost.device, options_.refine.device_budget_seconds) << refined->reason;
  EXPECT_GT(refined->Result("vendor")->samples, 10) << "extra rounds: " << refined->reason;
  EXPECT_EQ(refined->reason.find("timed 0 more"), std::string::npos) << refined->reason;
}

TEST_F(ArbiterTest, ACloseRefinementIsExtendedWithinTheRefinementsDeviceBudget) {
  // The refinement's 10 rounds take about 0.2ms; its budget leaves room for two
  // more rounds of the 10 a coin flip would take.
  options_.measure.min_samples = options_.measure.max_samples = 10;
  options_.refine.device_budget_seconds = 0.24e-3;
  auto arbiter = Start(Close({2, 4, 6, 8}, /*ours_at_bucket=*/12e-6));
  ASSERT_TRUE(arbiter->Tune(kBucketShape).ok());
  absl::StatusOr<Verdict> refined = arbiter->Tune(kNarrowShape);
  ASSERT_TRUE(refined.ok()) << refined.status();
  EXPECT_LE(refined->cost.device, options_.refine.device_budget_seconds) << refined->reason;
  EXPECT_GT(refined->Result("ours")->samples, 10) << refined->reason;
  EXPECT_NE(refined->reason.find("device budget"), std::string::npos) << refined->reason;
  EXPECT_EQ(Listed(*arbiter).size(), 2u) << "never separated: the bucket stays whole";
}

}  // namespace
}  // namespace arbiter
