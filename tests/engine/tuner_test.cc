#include "engine/tuner.h"

#include "gtest/gtest.h"
#include "tests/engine/fake_engine.h"

namespace arbiter {
namespace {

using testing::FakeEngine;
using testing::FakeCandidate;
using testing::FakeStream;
using testing::NaiveGemm;
using testing::TimedKernel;

class TunerTest : public ::testing::Test {
 protected:
  void Start(std::vector<CandidateSpec> candidates) {
    ASSERT_TRUE(engine_.Start(std::move(candidates)).ok());
    TunerOptions options;
    options.measure.min_samples = 5;
    options.measure.max_samples = 9;
    options.measure.warmup_runs = 1;
    tuner_ = std::make_unique<Tuner>(options, engine_.backend, *engine_.registry, *engine_.store,
                                     node_verdicts_, *engine_.streams, *engine_.quarantine, cache_);
  }
  void TearDown() override { tuner_.reset(); }

  FakeEngine engine_;
  VerdictCache cache_{16};
  NodeVerdicts node_verdicts_;
  std::unique_ptr<Tuner> tuner_;
  const Problem p_{DType::kF32, 24, 40, 64};
};

TEST_F(TunerTest, AMeasurementIsStoredAndCachedUnderItsBucket) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("fast", 1, TimedKernel(10e-6)));
  c.push_back(FakeCandidate("vendor", 3, TimedKernel(100e-6)));
  Start(std::move(c));
  absl::StatusOr<Verdict> v = tuner_->MeasureOnce(p_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->winner, "fast");  // 10x faster than the tier default: beyond any noise
  EXPECT_EQ(v->candidates, "fast@1,vendor@1");
  EXPECT_EQ(v->measured, p_);
  EXPECT_EQ(tuner_->measurements(), 1);
  absl::StatusOr<Verdict> stored = engine_.store->GetVerdict(engine_.fingerprint(), p_.dtype, BucketOf(p_));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->winner, "fast");
  std::optional<Verdict> cached = cache_.Get(BucketKeyOf(p_));
  ASSERT_TRUE(cached.has_value());
  EXPECT_EQ(cached->winner, "fast");
}

TEST_F(TunerTest, ADisprovedClaimQuarantinesTheCandidateForTheProblemsDtype) {
  auto calls = std::make_shared<int>(0);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("vendor", 3, TimedKernel(100e-6)));
  c.push_back(FakeCandidate("flaky", 2, [calls](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    if ((*calls)++ % 2) static_cast<float*>(a.c)[0] *= 1.0000001f;
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  Start(std::move(c));
  absl::StatusOr<Verdict> v = tuner_->MeasureOnce(p_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->winner, "vendor");
  const CandidateSpec& flaky = engine_.Spec("flaky");
  EXPECT_TRUE(engine_.quarantine->Covers(flaky, DType::kF32, BucketOf(Problem{DType::kF32, 8, 8, 8})));
  EXPECT_FALSE(engine_.quarantine->Covers(flaky, DType::kF64, BucketOf(p_)));
  // The next measurement of the dtype no longer races it.
  absl::StatusOr<Verdict> again = tuner_->MeasureOnce(Problem{DType::kF32, 8, 8, 8});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->candidates, "vendor@1");
}

TEST_F(TunerTest, NothingEligibleIsAFailedPreconditionWithEachReason) {
  std::vector<CandidateSpec> c;
  CandidateSpec gpu = FakeCandidate("gpu_only", 3, TimedKernel(1e-6));
  for (auto& m : gpu.members) m.contract.arch = "sm_90a";
  c.push_back(std::move(gpu));
  Start(std::move(c));
  absl::StatusOr<Verdict> v = tuner_->MeasureOnce(p_);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(v.status().message().find("gpu_only: "), std::string::npos) << v.status();
  EXPECT_EQ(tuner_->measurements(), 0);
}

TEST_F(TunerTest, QueuedWorkForOneBucketIsMeasuredOnceInTheBackground) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("fast", 1, TimedKernel(10e-6)));
  Start(std::move(c));
  tuner_->Enqueue(p_);
  tuner_->Enqueue(p_);
  tuner_->Enqueue(Problem{DType::kF32, 32, 48, 56});  // the same bucket at another shape
  tuner_->WaitIdle();
  EXPECT_EQ(tuner_->measurements(), 1);
  EXPECT_TRUE(cache_.Get(BucketKeyOf(p_)).has_value());
}

}  // namespace
}  // namespace arbiter
