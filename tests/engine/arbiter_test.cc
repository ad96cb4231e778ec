#include "engine/arbiter.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "engine/oracle.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_backend.h"

namespace arbiter {
namespace {

using testing::FakeBackend;
using testing::FakeCandidate;
using testing::FakeStream;
using testing::NaiveGemm;
using testing::ShapedKernel;
using testing::TimedKernel;
using testing::Gate;

// A shared store as a daemon sees it through an outage: a SQLite store underneath,
// every call failing UNAVAILABLE while `down`, and Resync() delivering what a
// PostgreSQL store delivers when its notification connection is back (changes
// may have been missed).
class OutageStore final : public VerdictStore {
 public:
  explicit OutageStore(std::unique_ptr<VerdictStore> inner) : inner_(std::move(inner)) {}

  VerdictStore& inner() { return *inner_; }
  void set_down(bool down) { down_ = down; }
  // Writes of verdicts fail (a full disk) while reads still answer.
  void set_refuse_verdicts(bool refuse) { refuse_verdicts_ = refuse; }
  void Resync() {
    std::lock_guard lock(subscribers_->mu);
    if (subscribers_->on_change) subscribers_->on_change(StoreChange{});
  }

  std::string Describe() const override { return "outage store"; }
  bool shared() const override { return true; }
  int schema_version() const override { return inner_->schema_version(); }
  absl::Status Health() override { return Up(); }
  absl::Status PutVerdict(const Verdict& v) override {
    RETURN_IF_ERROR(Up());
    if (refuse_verdicts_) return absl::ResourceExhaustedError("outage store: disk full");
    return inner_->PutVerdict(v);
  }
  absl::StatusOr<Verdict> GetVerdict(const std::string& fp, DType d, const Bucket& b) override {
    RETURN_IF_ERROR(Up());
    return inner_->GetVerdict(fp, d, b);
  }
  absl::StatusOr<std::vector<Verdict>> ListVerdicts(const std::string& fp,
                                                    const VerdictFilter& f) override {
    RETURN_IF_ERROR(Up());
    return inner_->ListVerdicts(fp, f);
  }
  absl::StatusOr<int64_t> CountVerdicts(const std::string& fp) override {
    RETURN_IF_ERROR(Up());
    return inner_->CountVerdicts(fp);
  }
  absl::StatusOr<int> Invalidate(const std::string& fp, const InvalidateScope& scope) override {
    RETURN_IF_ERROR(Up());
    return inner_->Invalidate(fp, scope);
  }
  absl::Status PutForce(const Force& f) override {
    RETURN_IF_ERROR(Up());
    return inner_->PutForce(f);
  }
  absl::StatusOr<std::optional<Force>> GetForce(const std::string& fp, DType d,
                                                const Bucket& b) override {
    RETURN_IF_ERROR(Up());
    return inner_->GetForce(fp, d, b);
  }
  absl::StatusOr<bool> RemoveForce(const std::string& fp, DType d, const Bucket& b,
                                   const VerdictScope& scope) override {
    RETURN_IF_ERROR(Up());
    return inner_->RemoveForce(fp, d, b, scope);
  }
  absl::StatusOr<std::vector<Force>> ListForces(const std::string& fp) override {
    RETURN_IF_ERROR(Up());
    return inner_->ListForces(fp);
  }
  absl::Status PutQuarantine(const QuarantineEntry& q) override {
    RETURN_IF_ERROR(Up());
    return inner_->PutQuarantine(q);
  }
  absl::StatusOr<std::vector<QuarantineEntry>> ListQuarantine(const std::string& fp) override {
    RETURN_IF_ERROR(Up());
    return inner_->ListQuarantine(fp);
  }
  absl::StatusOr<int> ClearQuarantine(const std::string& fp, const std::string& c) override {
    RETURN_IF_ERROR(Up());
    return inner_->ClearQuarantine(fp, c);
  }
  absl::StatusOr<std::unique_ptr<StoreLease>> TryLease(const std::string& fp, DType d,
                                                       const Bucket& b,
                                                       const VerdictScope& s) override {
    RETURN_IF_ERROR(Up());
    return inner_->TryLease(fp, d, b, s);
  }
  std::unique_ptr<StoreSubscription> Subscribe(
      std::function<void(const StoreChange&)> on_change) override {
    std::lock_guard lock(subscribers_->mu);
    subscribers_->on_change = std::move(on_change);
    return std::make_unique<Subscription>(subscribers_);
  }

 private:
  struct Subscribers {
    std::mutex mu;
    std::function<void(const StoreChange&)> on_change;  // GUARDED_BY(mu)
  };
  class Subscription final : public StoreSubscription {
   public:
    explicit Subscription(std::shared_ptr<Subscribers> s) : s_(std::move(s)) {}
    ~Subscription() override {
      std::lock_guard lock(s_->mu);
      s_->on_change = nullptr;
    }

   private:
    std::shared_ptr<Subscribers> s_;
  };

  absl::Status Up() const {
    return down_ ? absl::UnavailableError("outage store: down") : absl::OkStatus();
  }

  std::unique_ptr<VerdictStore> inner_;
  std::atomic<bool> down_{false};
  std::atomic<bool> refuse_verdicts_{false};
  std::shared_ptr<Subscribers> subscribers_ = std::make_shared<Subscribers>();
};

class ArbiterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("arbiter_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    options_.measure.min_samples = 5;
    options_.measure.max_samples = 9;
    options_.measure.warmup_runs = 1;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // An engine on a SQLite store in dir_, or on `store` when given.
  std::unique_ptr<Arbiter> Start(std::vector<CandidateSpec> candidates,
                                 std::unique_ptr<VerdictStore> store = nullptr) {
    auto backend = std::make_unique<FakeBackend>();
    auto registry = Registry::Create(std::move(candidates), *backend);
    EXPECT_TRUE(registry.ok()) << registry.status();
    if (store == nullptr) {
      auto opened = VerdictStore::Open((dir_ / "verdicts.db").string());
      EXPECT_TRUE(opened.ok()) << opened.status();
      store = std::move(*opened);
    }
    auto arbiter = Arbiter::Create(options_, std::move(backend), std::move(*registry), std::move(store));
    EXPECT_TRUE(arbiter.ok()) << arbiter.status();
    return std::move(*arbiter);
  }

  // fast (tier 1, 10us), vendor (tier 3, 100us), broken (tier 3, skips K: fails the oracle),
  // gpu_only (ineligible here).
  std::vector<CandidateSpec> Standard(int fast_version = 1) {
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("fast", 1, TimedKernel(10e-6, 0.01), Determinism::kRunToRun, fast_version));
    c.push_back(FakeCandidate("vendor", 3, TimedKernel(100e-6, 0.01)));
    c.push_back(FakeCandidate("broken", 3, [](const GemmArgs& a) {
      NaiveGemm(a, a.problem.k - 1, a.problem.m);
      static_cast<FakeStream*>(a.stream)->Advance(1e-6);
      return absl::OkStatus();
    }));
    CandidateSpec gpu = FakeCandidate("gpu_only", 3, TimedKernel(1e-6));
    for (auto& m : gpu.members) m.contract.arch = "sm_90a";
    c.push_back(std::move(gpu));
    return c;
  }

  std::filesystem::path dir_;
  ArbiterOptions options_;
  const Problem p_{DType::kF32, 24, 40, 64};
};

// The verdict agrees with its own figures: the winner passed and was timed, and any
// faster timed candidate was within noise of it.
void ExpectConsistent(const Verdict& v, const NoisePolicy& noise) {
  const CandidateResult* w = v.Result(v.winner);
  ASSERT_NE(w, nullptr) << v;
  EXPECT_TRUE(w->timed()) << v;
  for (const CandidateResult& r : v.results) {
    if (!r.timed() || r.median_seconds >= w->median_seconds) continue;
    const double margin = w->median_seconds / r.median_seconds - 1.0;
    EXPECT_LE(margin, noise.noise_multiple * std::max({r.spread, w->spread, noise.noise_floor}))
        << r.name << " is clearly faster than the winner " << v.winner;
  }
}

TEST_F(ArbiterTest, SyncMissMeasuresEveryEligibleCandidateAndPicksFastestCorrect) {
  auto arbiter = Start(Standard());
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kMeasured);
  ASSERT_TRUE(s->verdict.has_value());
  const Verdict& v = *s->verdict;
  ExpectConsistent(v, options_.noise);
  EXPECT_EQ(s->candidate, v.winner);
  // Every eligible candidate appears, timed or with a reason; the ineligible one was not raced.
  ASSERT_EQ(v.results.size(), 3u) << v;
  EXPECT_EQ(v.Result("broken")->state, ResultState::kFailedOracle);
  EXPECT_FALSE(v.Result("broken")->reason.empty());
  EXPECT_EQ(v.Result("broken")->median_seconds, 0.0);  // never a latency
  EXPECT_EQ(v.Result("gpu_only"), nullptr);
  EXPECT_TRUE(v.Result("fast")->timed());
  EXPECT_TRUE(v.Result("vendor")->timed());
  EXPECT_EQ(arbiter->measurements(), 1);
}

TEST_F(ArbiterTest, RestartServesStoredVerdictsWithoutMeasuringAgain) {
  std::string winner;
  {
    auto arbiter = Start(Standard());
    auto s = arbiter->Select(p_, {});
    ASSERT_TRUE(s.ok()) << s.status();
    winner = s->candidate;
  }
  auto arbiter = Start(Standard());
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kMeasured);
  EXPECT_EQ(s->candidate, winner);
  EXPECT_EQ(arbiter->measurements(), 0);
}

TEST_F(ArbiterTest, VerdictOfAnotherCandidateVersionIsNotServed) {
  {
    auto arbiter = Start(Standard(/*fast_version=*/1));
    ASSERT_TRUE(arbiter->Select(p_, {}).ok());
  }
  auto arbiter = Start(Standard(/*fast_version=*/2));
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(arbiter->measurements(), 1);
  EXPECT_NE(s->verdict->candidates.find("fast@2"), std::string::npos);
}

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
  // `vendor` (tier 3) wins the bucket at 64^3; at 40x64x64 `other` is 4% faster,
  // each wobbling 10% out of step with the other, so the per-round ratios spread
  // about 10% too: not enough to split the bucket, but the shape's own verdict is
  // served by the faster there.
  const auto at = [](double bucket, double narrow) {
    return [=](const Problem& p) { return p.m <= 48 ? narrow : bucket; };
  };
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("vendor", 3, NoisyShapedKernel(at(10e-6, 10.4e-6))));
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

TEST_F(ArbiterTest, AChallengerFasterInEveryRoundWinsTheBucketThoughEachOnesSpreadIsHuge) {
  // Each sample's time scatters by a factor the round's samples share: on each
  // one's own spread (about 100%), ours' 57% margin would be noise.
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("vendor", 3, testing::RoundScatteredKernel(22.6e-6)));
  c.push_back(FakeCandidate("ours", 2, testing::RoundScatteredKernel(14.4e-6)));
  auto arbiter = Start(std::move(c));
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->verdict.has_value());
  ASSERT_GT(s->verdict->Result("vendor")->spread, 0.5) << *s->verdict;
  EXPECT_EQ(s->candidate, "ours") << s->verdict->reason;
  EXPECT_NE(s->verdict->reason.find("paired over"), std::string::npos) << s->verdict->reason;
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

TEST_F(ArbiterTest, AsyncAnswersAtOnceAndMeasuresOnceUnderConcurrentRequests) {
  auto gate = std::make_shared<Gate>();
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("gated", 2, [gate](const GemmArgs& a) {
    gate->Pass();
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(5e-6);
    return absl::OkStatus();
  }));
  c.push_back(FakeCandidate("vendor", 3, TimedKernel(100e-6)));
  options_.tuning = TuningPolicy::kAsync;
  auto arbiter = Start(std::move(c));

  // The background measurement blocks inside "gated": every answer below comes without it.
  auto first = arbiter->Select(p_, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source, VerdictSource::kProvisional);
  EXPECT_EQ(first->candidate, "vendor");  // the tier default
  gate->WaitEntered();
  std::vector<std::thread> clients;
  std::atomic<int> provisional{0};
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      auto s = arbiter->Select(p_, {});
      if (s.ok() && s->source == VerdictSource::kProvisional) ++provisional;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(provisional.load(), 8);
  gate->Open();
  arbiter->WaitIdle();
  EXPECT_EQ(arbiter->measurements(), 1);
  auto after = arbiter->Select(p_, {});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->source, VerdictSource::kMeasured);
}

TEST_F(ArbiterTest, ConcurrentSyncRequestsForOneBucketShareOneMeasurement) {
  auto gate = std::make_shared<Gate>();
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("gated", 2, [gate](const GemmArgs& a) {
    gate->Pass();
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(5e-6);
    return absl::OkStatus();
  }));
  options_.workers = 2;  // a second stream, so a duplicate measurement could start
  auto arbiter = Start(std::move(c));
  std::vector<std::thread> clients;
  std::atomic<int> measured{0};
  auto client = [&] {
    auto s = arbiter->Select(p_, {});
    if (s.ok() && s->source == VerdictSource::kMeasured) ++measured;
  };
  clients.emplace_back(client);
  gate->WaitEntered();
  for (int i = 0; i < 7; ++i) clients.emplace_back(client);
  gate->Open();
  for (auto& t : clients) t.join();
  EXPECT_EQ(measured.load(), 8);
  EXPECT_EQ(arbiter->measurements(), 1);
}

TEST_F(ArbiterTest, ABucketQueuedForTheBackgroundAndAskedForSynchronouslyIsMeasuredOnce) {
  // Kernels block only on q's shape, so the measuring thread can be held busy on q.
  const Problem q{DType::kF32, 8, 8, 8};
  auto gate = std::make_shared<Gate>();
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("gated_on_q", 2, [gate, q](const GemmArgs& a) {
    if (a.problem == q) gate->Pass();
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(5e-6);
    return absl::OkStatus();
  }));
  options_.workers = 2;
  auto arbiter = Start(std::move(c));
  auto first = std::async(std::launch::async, [&] { return arbiter->Select(q, {}); });
  gate->WaitEntered();  // the measuring thread holds q
  SelectOptions async;
  async.tuning = TuningPolicy::kAsync;
  auto queued = arbiter->Select(p_, async);  // p_ waits in the queue behind q
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->source, VerdictSource::kProvisional);
  auto waiting = std::async(std::launch::async, [&] { return arbiter->Select(p_, {}); });
  gate->Open();
  const absl::StatusOr<Selection> measured = waiting.get();  // joined the queued entry
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->source, VerdictSource::kMeasured);
  EXPECT_TRUE(first.get().ok());
  arbiter->WaitIdle();
  EXPECT_EQ(arbiter->measurements(), 2);  // q once, p_ once
}

TEST_F(ArbiterTest, TuningOffAnswersWithTheTierDefault) {
  options_.tuning = TuningPolicy::kOff;
  auto arbiter = Start(Standard());
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kTierDefault);
  EXPECT_EQ(s->candidate, "vendor");  // highest tier, first registered among eligible
  EXPECT_EQ(arbiter->measurements(), 0);
}

TEST_F(ArbiterTest, ForceAndUnforce) {
  auto arbiter = Start(Standard());
  ASSERT_TRUE(arbiter->Force(p_, "vendor", "pinned by test").ok());
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->source, VerdictSource::kForced);
  EXPECT_EQ(s->candidate, "vendor");
  EXPECT_EQ(arbiter->measurements(), 0);
  auto removed = arbiter->Unforce(p_);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(*removed);
  s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->source, VerdictSource::kMeasured);
}

TEST_F(ArbiterTest, AForceOfOneExactShapeServesThatShapeAloneBeforeItsBucketsForceAndVerdict) {
  auto arbiter = Start(Standard());
  ASSERT_TRUE(arbiter->Tune(p_).ok());  // the bucket's verdict: fast
  const Problem other{DType::kF32, 32, 48, 56};
  ASSERT_EQ(BucketOf(other), BucketOf(p_));
  ASSERT_TRUE(arbiter->Force(p_, "vendor", "pinned at this shape", Reach::kFleet,
                             /*exact_shape=*/true)
                  .ok());
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kForced);
  EXPECT_EQ(s->candidate, "vendor");
  auto rest = arbiter->Select(other, {});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(rest->source, VerdictSource::kMeasured) << "the bucket's other shapes keep its verdict";
  EXPECT_EQ(rest->candidate, "fast");

  // Before the bucket's own force too; each is listed with its scope and removed alone.
  ASSERT_TRUE(arbiter->Force(other, "fast", "the bucket's pin", Reach::kNode).ok());
  EXPECT_EQ(arbiter->Select(p_, {})->candidate, "vendor");
  EXPECT_EQ(arbiter->Select(other, {})->source, VerdictSource::kForced);
  absl::StatusOr<std::vector<Forces::Entry>> listed = arbiter->ListForces();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  std::map<std::string, Forces::Entry> by_scope;
  for (const Forces::Entry& e : *listed) by_scope[e.force.scope.ToString()] = e;
  ASSERT_TRUE(by_scope.count("24x40x64") && by_scope.count(""));
  EXPECT_EQ(by_scope.at("24x40x64").reach, Reach::kFleet);
  EXPECT_EQ(by_scope.at("").reach, Reach::kNode);

  absl::StatusOr<bool> removed = arbiter->Unforce(p_, Reach::kFleet, /*exact_shape=*/true);
  ASSERT_TRUE(removed.ok() && *removed) << removed.status();
  EXPECT_EQ(arbiter->Select(p_, {})->candidate, "fast") << "the bucket's force serves it again";
  ASSERT_TRUE(arbiter->Unforce(p_, Reach::kNode).ok());
  s = arbiter->Select(p_, {});
  EXPECT_EQ(s->source, VerdictSource::kMeasured);
  EXPECT_EQ(arbiter->measurements(), 1);
}

TEST_F(ArbiterTest, AnExactShapeForceSurvivesRestart) {
  ASSERT_TRUE(Start(Standard())
                  ->Force(p_, "vendor", "pinned at this shape", Reach::kFleet, /*exact_shape=*/true)
                  .ok());
  options_.tuning = TuningPolicy::kOff;
  auto arbiter = Start(Standard());
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kForced);
  EXPECT_EQ(s->candidate, "vendor");
  EXPECT_EQ(arbiter->Select(Problem{DType::kF32, 32, 48, 56}, {})->source,
            VerdictSource::kTierDefault);
}

TEST_F(ArbiterTest, ForceRefusesUnknownAndNonCoveringCandidates) {
  std::vector<CandidateSpec> c = Standard();
  CandidateSpec small = FakeCandidate("small_m", 2, TimedKernel(1e-6));
  for (auto& m : small.members) m.contract.shape.max_m = 16;
  c.push_back(std::move(small));
  auto arbiter = Start(std::move(c));
  EXPECT_EQ(arbiter->Force(p_, "nope", "").code(), absl::StatusCode::kNotFound);
  const absl::Status s = arbiter->Force(p_, "small_m", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("M=24 is above its maximum 16"), std::string::npos) << s.message();
}

TEST_F(ArbiterTest, BrokenDeterminismClaimIsQuarantinedAndNeverServed) {
  std::vector<CandidateSpec> c = Standard();
  auto calls = std::make_shared<int>(0);
  c.push_back(FakeCandidate("flaky", 3, [calls](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    // Claims run_to_run, but every other run perturbs one element by an ulp-sized step.
    if ((*calls)++ % 2) static_cast<float*>(a.c)[0] *= 1.0000001f;
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  auto arbiter = Start(std::move(c));
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(s->candidate, "flaky");
  const CandidateResult* r = s->verdict->Result("flaky");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->state, ResultState::kQuarantined);
  EXPECT_NE(r->reason.find("run_to_run claim failed"), std::string::npos) << r->reason;
  auto q = arbiter->ListQuarantine();
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 1u);
  EXPECT_EQ((*q)[0].candidate, "flaky");
  SelectOptions strict;
  strict.required = Determinism::kRunToRun;
  auto st = arbiter->Select(p_, strict);
  ASSERT_TRUE(st.ok());
  EXPECT_NE(st->candidate, "flaky");
}

TEST_F(ArbiterTest, BrokenBatchInvarianceClaimIsQuarantined) {
  std::vector<CandidateSpec> c = Standard();
  c.push_back(FakeCandidate("m_dependent", 2, [](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    if (a.problem.m < 24) static_cast<float*>(a.c)[0] += 1e-3f;  // row 0 depends on M
    static_cast<FakeStream*>(a.stream)->Advance(2e-6);
    return absl::OkStatus();
  }, Determinism::kBatchInvariant));
  auto arbiter = Start(std::move(c));
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  const CandidateResult* r = s->verdict->Result("m_dependent");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->state, ResultState::kQuarantined);
  EXPECT_NE(r->reason.find("batch_invariant claim failed"), std::string::npos) << r->reason;
}

TEST_F(ArbiterTest, DeterminismRequirementIsHonouredFromTheSameFigures) {
  std::vector<CandidateSpec> c = Standard();
  c.push_back(FakeCandidate("atomic", 2, TimedKernel(1e-6), Determinism::kNondeterministic));
  auto arbiter = Start(std::move(c));
  auto any = arbiter->Select(p_, {});
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->candidate, "atomic");
  SelectOptions strict;
  strict.required = Determinism::kRunToRun;
  auto s = arbiter->Select(p_, strict);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->source, VerdictSource::kMeasured);
  EXPECT_EQ(s->candidate, "fast");
  EXPECT_EQ(arbiter->measurements(), 1);
}

TEST_F(ArbiterTest, InvalidateByCandidateForcesRemeasurement) {
  auto arbiter = Start(Standard());
  ASSERT_TRUE(arbiter->Select(p_, {}).ok());
  const Problem other{DType::kF64, 8, 8, 8};
  ASSERT_TRUE(arbiter->Select(other, {}).ok());
  InvalidateScope scope;
  scope.dtype = DType::kF32;
  auto removed = arbiter->Invalidate(scope);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1);
  ASSERT_TRUE(arbiter->Select(other, {}).ok());
  EXPECT_EQ(arbiter->measurements(), 2);  // f64 verdict kept
  ASSERT_TRUE(arbiter->Select(p_, {}).ok());
  EXPECT_EQ(arbiter->measurements(), 3);  // f32 re-measured
}

TEST_F(ArbiterTest, DispatchRunsTheSelectedKernelAndReportsDeviceTime) {
  auto arbiter = Start(Standard());
  std::vector<float> a(p_.m * p_.k), b(p_.k * p_.n);
  FillRandom(DType::kF32, a.data(), a.size(), 7);
  FillRandom(DType::kF32, b.data(), b.size(), 8);
  auto r = arbiter->Dispatch(p_, {}, a.data(), a.size() * 4, b.data(), b.size() * 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->device_seconds, 0);
  ASSERT_EQ(r->c.size(), p_.c_bytes());
  const float* c = reinterpret_cast<const float*>(r->c.data());
  for (int64_t i = 0; i < p_.m; i += 7)
    for (int64_t j = 0; j < p_.n; j += 5) {
      double ref = 0;
      for (int64_t k = 0; k < p_.k; ++k) ref += double(a[i * p_.k + k]) * b[k * p_.n + j];
      EXPECT_NEAR(c[i * p_.n + j], ref, 1e-4);
    }
}

TEST_F(ArbiterTest, DispatchRejectsWrongOperandSizesBeforeRunning) {
  auto arbiter = Start(Standard());
  std::vector<float> a(p_.m * p_.k), b(p_.k * p_.n);
  auto r = arbiter->Dispatch(p_, {}, a.data(), a.size() * 4 - 4, b.data(), b.size() * 4);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("a: expected 6144 bytes"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(arbiter->measurements(), 0);
  auto bad = arbiter->Select(Problem{DType::kF32, 0, 4, 4}, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ArbiterTest, SampledVerificationQuarantinesACandidateThatGoesWrongLive) {
  // "drifty" is correct while measured, then starts skipping a K element on live dispatches.
  auto live = std::make_shared<std::atomic<bool>>(false);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("drifty", 2, [live](const GemmArgs& a) {
    NaiveGemm(a, *live ? a.problem.k - 1 : a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  c.push_back(FakeCandidate("vendor", 3, TimedKernel(100e-6)));
  options_.verify_fraction = 1.0;
  auto arbiter = Start(std::move(c));
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->candidate, "drifty");
  *live = true;
  std::vector<float> a(p_.m * p_.k), b(p_.k * p_.n);
  FillRandom(DType::kF32, a.data(), a.size(), 7);
  FillRandom(DType::kF32, b.data(), b.size(), 8);
  ASSERT_TRUE(arbiter->Dispatch(p_, {}, a.data(), a.size() * 4, b.data(), b.size() * 4).ok());
  auto q = arbiter->ListQuarantine();
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 1u);
  EXPECT_EQ((*q)[0].candidate, "drifty");
  auto after = arbiter->Select(p_, {});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->candidate, "vendor");
}

TEST_F(ArbiterTest, ASelectOnAStoredVerdictIsRememberedNotDecidedAgain) {
  auto arbiter = Start(Standard());
  auto first = arbiter->SelectShared(p_, {});
  ASSERT_TRUE(first.ok()) << first.status();  // measured here; remembered from the next one
  auto second = arbiter->SelectShared(p_, {});
  auto third = arbiter->SelectShared(p_, {});
  ASSERT_TRUE(second.ok() && third.ok());
  EXPECT_EQ(second->get(), third->get()) << "the same remembered answer, not a new decision";
  EXPECT_EQ((*third)->candidate, "fast");
  EXPECT_EQ((*third)->source, VerdictSource::kMeasured);
  // A stricter determinism is another question with its own answer.
  auto strict = arbiter->SelectShared(p_, {.required = Determinism::kBatchInvariant});
  EXPECT_TRUE(!strict.ok() || strict->get() != third->get());
}

TEST_F(ArbiterTest, EveryChangeASelectionDependsOnIsSeenByTheNextSelect) {
  auto arbiter = Start(Standard());
  ASSERT_EQ(arbiter->Select(p_, {})->candidate, "fast");
  ASSERT_EQ(arbiter->Select(p_, {})->candidate, "fast");  // remembered

  ASSERT_TRUE(arbiter->Force(p_, "vendor", "pin").ok());
  EXPECT_EQ(arbiter->Select(p_, {})->candidate, "vendor");
  EXPECT_EQ(arbiter->Select(p_, {})->source, VerdictSource::kForced);
  ASSERT_TRUE(arbiter->Unforce(p_).ok());
  EXPECT_EQ(arbiter->Select(p_, {})->candidate, "fast");

  ASSERT_TRUE(arbiter->Quarantine("fast", QuarantineScope::Everywhere(), "test").ok());
  EXPECT_EQ(arbiter->Select(p_, {})->candidate, "vendor");
  ASSERT_TRUE(arbiter->ClearQuarantine("fast").ok());
  EXPECT_EQ(arbiter->Select(p_, {})->candidate, "fast");

  const int64_t measured = arbiter->measurements();
  InvalidateScope all;
  all.all = true;
  ASSERT_TRUE(arbiter->Invalidate(all).ok());
  EXPECT_EQ(arbiter->Select(p_, {})->candidate, "fast");
  EXPECT_EQ(arbiter->measurements(), measured + 1) << "invalidated: measured again, not remembered";
}

// The shared store's notifications were lost and it still cannot be read (its
// notification connection came back first): the daemon keeps serving the verdicts it
// held rather than falling back to tier defaults, and re-reads them once the store answers.
TEST_F(ArbiterTest, AfterLostNotificationsAnUnreadableStoreLeavesHeldVerdictsServed) {
  options_.tuning = TuningPolicy::kOff;  // a miss is the tier default (vendor), never measured
  auto sqlite = VerdictStore::Open((dir_ / "verdicts.db").string());
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  auto owned = std::make_unique<OutageStore>(std::move(*sqlite));
  OutageStore* store = owned.get();
  auto arbiter = Start(Standard(), std::move(owned));
  ASSERT_TRUE(arbiter->Tune(p_).ok());
  ASSERT_EQ(arbiter->Select(p_, {})->source, VerdictSource::kMeasured);

  store->set_down(true);
  store->Resync();
  absl::StatusOr<Selection> during = arbiter->Select(p_, {});
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->source, VerdictSource::kMeasured) << during->reason;
  EXPECT_EQ(during->candidate, "fast");

  // Back, without the verdict (another daemon invalidated it meanwhile): not served.
  store->set_down(false);
  ASSERT_TRUE(store->inner().Invalidate(arbiter->device().Fingerprint(), InvalidateScope{.all = true}).ok());
  absl::StatusOr<Selection> after = arbiter->Select(p_, {});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->source, VerdictSource::kTierDefault);
}

TEST(TuningPolicyTest, ARequestMayLowerTheDaemonsPolicyButNeverRaiseIt) {
  using P = TuningPolicy;
  for (P daemon : {P::kSync, P::kAsync, P::kOff}) {
    EXPECT_EQ(EffectivePolicy(daemon, std::nullopt), daemon);
    EXPECT_EQ(EffectivePolicy(daemon, P::kOff), P::kOff);
    EXPECT_EQ(EffectivePolicy(daemon, P::kSync), daemon);
  }
  EXPECT_EQ(EffectivePolicy(P::kSync, P::kAsync), P::kAsync);
  EXPECT_EQ(EffectivePolicy(P::kOff, P::kAsync), P::kOff);
}

TEST_F(ArbiterTest, ASyncRequestToADaemonWithTuningOffMeasuresNothing) {
  options_.tuning = TuningPolicy::kOff;
  auto arbiter = Start(Standard());
  SelectOptions sync;
  sync.tuning = TuningPolicy::kSync;
  auto s = arbiter->Select(p_, sync);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kTierDefault);
  SelectOptions async;
  async.tuning = TuningPolicy::kAsync;
  auto a = arbiter->Select(p_, async);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->source, VerdictSource::kTierDefault);
  arbiter->WaitIdle();
  EXPECT_EQ(arbiter->measurements(), 0);
}

TEST_F(ArbiterTest, ASyncRequestToAnAsyncDaemonIsAnsweredAtOnceAndMeasuredInTheBackground) {
  options_.tuning = TuningPolicy::kAsync;
  auto arbiter = Start(Standard());
  SelectOptions sync;
  sync.tuning = TuningPolicy::kSync;
  auto s = arbiter->Select(p_, sync);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kProvisional);
  arbiter->WaitIdle();
  EXPECT_EQ(arbiter->measurements(), 1);
}

TEST_F(ArbiterTest, ARequestForNoTuningIsAnsweredWithTheTierDefaultByASyncDaemon) {
  auto arbiter = Start(Standard());
  SelectOptions off;
  off.tuning = TuningPolicy::kOff;
  auto s = arbiter->Select(p_, off);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kTierDefault);
  EXPECT_EQ(arbiter->measurements(), 0);
}

// A candidate whose kernels wait at `gate` on problem `q` only, and log the M of every run.
struct Logged {
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<int64_t>> runs = std::make_shared<std::vector<int64_t>>();
  CandidateSpec Candidate(const std::string& name, const Problem& q) const {
    return FakeCandidate(name, 2, [gate = gate, mu = mu, runs = runs, q](const GemmArgs& a) {
      if (a.problem == q) gate->Pass();
      {
        std::lock_guard lock(*mu);
        runs->push_back(a.problem.m);
      }
      NaiveGemm(a, a.problem.k, a.problem.m);
      static_cast<FakeStream*>(a.stream)->Advance(5e-6);
      return absl::OkStatus();
    });
  }
};

TEST_F(ArbiterTest, ASyncMissPastTheTuningQueueIsAnsweredWithTheTierDefaultSayingWhy) {
  const Problem q{DType::kF32, 8, 8, 8};
  Logged logged;
  std::vector<CandidateSpec> c;
  c.push_back(logged.Candidate("logged", q));
  options_.tuning_queue = 1;
  options_.workers = 2;
  auto arbiter = Start(std::move(c));
  auto first = std::async(std::launch::async, [&] { return arbiter->Select(q, {}); });
  logged.gate->WaitEntered();

  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kTierDefault);
  EXPECT_NE(s->reason.find("tuning queue full"), std::string::npos) << s->reason;
  logged.gate->Open();
  EXPECT_TRUE(first.get().ok());
  arbiter->WaitIdle();
  EXPECT_EQ(arbiter->measurements(), 1);
}

TEST_F(ArbiterTest, ADispatchQueuedBehindAMeasurementRunsBetweenItsSamples) {
  const Problem q{DType::kF32, 8, 8, 8};
  Logged logged;
  std::vector<CandidateSpec> c;
  c.push_back(logged.Candidate("logged", q));
  options_.workers = 1;
  auto arbiter = Start(std::move(c));
  ASSERT_TRUE(arbiter->Force(p_, "logged", "dispatched without measuring").ok());
  auto measuring = std::async(std::launch::async, [&] { return arbiter->Select(q, {}); });
  logged.gate->WaitEntered();  // the measurement holds the only stream
  std::vector<float> a(p_.m * p_.k), b(p_.k * p_.n);
  FillRandom(DType::kF32, a.data(), a.size(), 7);
  FillRandom(DType::kF32, b.data(), b.size(), 8);
  auto dispatch = std::async(std::launch::async, [&] {
    return arbiter->Dispatch(p_, {}, a.data(), a.size() * 4, b.data(), b.size() * 4);
  });
  auto queued = [&] { return arbiter->queue_depth() == 1; };
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!queued() && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // between checks
  }
  ASSERT_TRUE(queued());

  logged.gate->Open();
  ASSERT_TRUE(dispatch.get().ok());
  ASSERT_TRUE(measuring.get().ok());
  std::lock_guard lock(*logged.mu);
  const auto at = std::find(logged.runs->begin(), logged.runs->end(), p_.m);
  ASSERT_NE(at, logged.runs->end());
  // The measurement went on after the dispatch had run: it lent its stream mid-way.
  EXPECT_NE(std::find(at, logged.runs->end(), q.m), logged.runs->end());
}

class ArbiterRestartTest : public ArbiterTest {
 protected:
  void SetUp() override {
    ArbiterTest::SetUp();
    options_.tuning_intent_file = (dir_ / "verdicts.db.intent").string();
  }
  // What a daemon that died measuring left behind.
  void DiedMeasuring(const std::string& candidate, int version, const Problem& p,
                     const std::string& cause = "") {
    auto journal = IntentJournal::Open(options_.tuning_intent_file);
    ASSERT_TRUE(journal.ok()) << journal.status();
    ASSERT_TRUE((*journal)->Record(Intent{candidate, version, p, "timing", cause, 4242, 0}).ok());
  }
  std::vector<QuarantineEntry> Quarantined(Arbiter& arbiter) {
    auto q = arbiter.ListQuarantine();
    EXPECT_TRUE(q.ok()) << q.status();
    return q.ok() ? *q : std::vector<QuarantineEntry>{};
  }
};

TEST_F(ArbiterRestartTest, TheCandidateRunningWhenTheDaemonDiedIsQuarantinedForThatBucket) {
  DiedMeasuring("fast", 1, p_);
  auto arbiter = Start(Standard());
  const std::vector<QuarantineEntry> q = Quarantined(*arbiter);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].candidate, "fast");
  EXPECT_EQ(q[0].scope, BucketKeyOf(p_).ToString());
  EXPECT_NE(q[0].reason.find("died while measuring it"), std::string::npos) << q[0].reason;
  EXPECT_NE(q[0].reason.find("f32 24x40x64"), std::string::npos) << q[0].reason;
  // The bucket is measured without it; other buckets still have it.
  auto s = arbiter->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->verdict->Result("fast"), nullptr);
  auto other = arbiter->Select(Problem{DType::kF32, 100, 100, 100}, {});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->verdict->Result("fast"), nullptr);
  // Learned once: the journal no longer names it.
  arbiter.reset();
  auto again = Start(Standard());
  EXPECT_EQ(Quarantined(*again).size(), 1u);
}

TEST_F(ArbiterRestartTest, TheCauseTheDaemonSawIsTheQuarantinesReason) {
  DiedMeasuring("vendor", 1, p_, "hung: no progress for 300s in its timing phase");
  auto arbiter = Start(Standard());
  const std::vector<QuarantineEntry> q = Quarantined(*arbiter);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_NE(q[0].reason.find("hung: no progress for 300s"), std::string::npos) << q[0].reason;
}

TEST_F(ArbiterRestartTest, ASecondDeathInAnotherBucketQuarantinesTheCandidateForTheDtype) {
  DiedMeasuring("fast", 1, p_);
  Start(Standard()).reset();
  DiedMeasuring("fast", 1, Problem{DType::kF32, 100, 100, 100});
  auto arbiter = Start(Standard());
  const std::vector<QuarantineEntry> q = Quarantined(*arbiter);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_TRUE(std::any_of(q.begin(), q.end(), [](const QuarantineEntry& e) { return e.scope == "f32"; }));
  auto s = arbiter->Select(Problem{DType::kF32, 300, 20, 30}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->verdict->Result("fast"), nullptr);
}

TEST_F(ArbiterRestartTest, ACandidateWhoseVersionChangedSinceIsNotBlamed) {
  DiedMeasuring("fast", 1, p_);
  auto arbiter = Start(Standard(/*fast_version=*/2));
  EXPECT_TRUE(Quarantined(*arbiter).empty());
}

}  // namespace
}  // namespace arbiter
