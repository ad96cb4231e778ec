#include "engine/measurer.h"

#include "gtest/gtest.h"
#include "tests/engine/fake_backend.h"

namespace arbiter {
namespace {

using testing::FakeBackend;
using testing::FakeCandidate;
using testing::FakeStream;
using testing::NaiveGemm;
using testing::TimedKernel;

class MeasurerTest : public ::testing::Test {
 protected:
  MeasurerTest() {
    options_.min_samples = 5;
    options_.max_samples = 9;
    options_.warmup_runs = 1;
    options_.seed = 5;
  }
  // Measures `p` over `candidates`, in the order given.
  std::vector<Measurement> Measure(std::vector<CandidateSpec> candidates, const Problem& p) {
    absl::StatusOr<std::vector<Measurement>> m = MeasureWith(std::move(candidates), p, nullptr);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : std::vector<Measurement>{};
  }
  absl::StatusOr<std::vector<Measurement>> MeasureWith(std::vector<CandidateSpec> candidates,
                                                       const Problem& p, MeasureHooks* hooks) {
    auto registry = Registry::Create(std::move(candidates), backend_);
    EXPECT_TRUE(registry.ok()) << registry.status();
    registry_ = std::move(*registry);
    std::vector<const RegisteredCandidate*> order;
    for (const RegisteredCandidate& c : registry_->candidates()) order.push_back(&c);
    Measurer measurer(backend_, stream_, options_, hooks);
    return measurer.Measure(p, order);
  }

  FakeBackend backend_;
  FakeStream stream_;
  MeasureOptions options_;
  std::unique_ptr<Registry> registry_;
  const Problem p_{DType::kF32, 24, 40, 64};
};

// Claims run_to_run; every other run perturbs one element.
KernelFn Flaky() {
  auto calls = std::make_shared<int>(0);
  return [calls](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    if ((*calls)++ % 2) static_cast<float*>(a.c)[0] *= 1.0000001f;
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  };
}

TEST_F(MeasurerTest, ACorrectCandidateIsTimedOnTheDeviceClock) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("steady", 2, TimedKernel(10e-6)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 1u);
  const CandidateResult& r = m[0].result;
  EXPECT_EQ(r.state, ResultState::kTimed) << r;
  EXPECT_DOUBLE_EQ(r.median_seconds, 10e-6);  // the fake device's clock, exactly
  EXPECT_EQ(r.spread, 0.0);
  EXPECT_EQ(r.samples, options_.min_samples);  // stable at once: no sample past the minimum
  EXPECT_EQ(r.determinism, Determinism::kRunToRun);
  EXPECT_FALSE(m[0].claim_violation);
}

TEST_F(MeasurerTest, AWrongResultFailsTheOracleAndIsNeverTimed) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("skips_k", 2, [](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k - 1, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  c.push_back(FakeCandidate("half_written", 2, [](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m / 2);
    return absl::OkStatus();
  }));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  for (const Measurement& x : m) {
    EXPECT_EQ(x.result.state, ResultState::kFailedOracle) << x.result;
    EXPECT_FALSE(x.result.reason.empty());
    EXPECT_EQ(x.result.median_seconds, 0.0);
    EXPECT_EQ(x.result.samples, 0);
  }
}

TEST_F(MeasurerTest, AFailedRunIsAnErrorWithItsStatus) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("declines", 2, [](const GemmArgs&) {
    return absl::UnimplementedError("K too small");
  }));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].result.state, ResultState::kError);
  EXPECT_NE(m[0].result.reason.find("run failed: UNIMPLEMENTED: K too small"), std::string::npos)
      << m[0].result.reason;
}

TEST_F(MeasurerTest, ADisprovedRunToRunClaimIsAClaimViolation) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("flaky", 2, Flaky()));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].result.state, ResultState::kQuarantined);
  EXPECT_TRUE(m[0].claim_violation);
  EXPECT_NE(m[0].result.reason.find("run_to_run claim failed: 1 of 960 elements differ"),
            std::string::npos)
      << m[0].result.reason;
}

TEST_F(MeasurerTest, ASecondRunThatFailsIsNoEvidenceAgainstTheClaim) {
  auto calls = std::make_shared<int>(0);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("fails_twice", 2, [calls](const GemmArgs& a) {
    if ((*calls)++ == 1) return absl::InternalError("lost the device");
    NaiveGemm(a, a.problem.k, a.problem.m);
    return absl::OkStatus();
  }));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].result.state, ResultState::kQuarantined);
  EXPECT_FALSE(m[0].claim_violation);
  EXPECT_NE(m[0].result.reason.find("second run failed"), std::string::npos) << m[0].result.reason;
}

TEST_F(MeasurerTest, ABatchInvarianceClaimIsCheckedAtASmallerM) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("m_dependent", 2, [](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    if (a.problem.m < 24) static_cast<float*>(a.c)[0] += 1e-3f;
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }, Determinism::kBatchInvariant));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_TRUE(m[0].claim_violation);
  EXPECT_NE(m[0].result.reason.find("batch_invariant claim failed: 1 of 480 elements of the first "
                                    "12 rows differ between M=24 and M=12"),
            std::string::npos)
      << m[0].result.reason;
}

TEST_F(MeasurerTest, ClaimsAreNotCheckedWhenTurnedOff) {
  options_.check_determinism = false;
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("flaky", 2, Flaky()));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].result.state, ResultState::kTimed);
  EXPECT_FALSE(m[0].claim_violation);
}

TEST_F(MeasurerTest, AHopelessCandidateStopsSamplingEarly) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("quick", 2, TimedKernel(1e-6)));
  c.push_back(FakeCandidate("slow", 2, TimedKernel(100e-6)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].result.state, ResultState::kTimed);
  EXPECT_EQ(m[1].result.samples, 3);
  EXPECT_NE(m[1].result.reason.find("stopped early: over 10x the best median"), std::string::npos)
      << m[1].result.reason;
}

TEST_F(MeasurerTest, ACandidateWithoutAMemberForTheDtypeIsUnmeasuredWithTheReason) {
  CandidateSpec f32_only = FakeCandidate("f32_only", 2, TimedKernel(1e-6));
  std::erase_if(f32_only.members, [](const CandidateMember& m) { return m.contract.dtype != DType::kF32; });
  std::vector<CandidateSpec> c;
  c.push_back(std::move(f32_only));
  const std::vector<Measurement> m = Measure(std::move(c), Problem{DType::kF64, 8, 8, 8});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].result.state, ResultState::kUnmeasured);
  EXPECT_EQ(m[0].result.reason, "no f64 entry point");
}

// Records what the measurer announces; the n-th checkpoint (from 1) fails when `fail_at` is set.
class RecordingHooks final : public MeasureHooks {
 public:
  void Launching(const CandidateSpec& candidate, std::string_view phase) override {
    launching = candidate.name;
    phases.push_back(candidate.name + ":" + std::string(phase));
  }
  absl::Status Checkpoint() override {
    ++checkpoints;
    if (fail_at > 0 && checkpoints >= fail_at) return absl::CancelledError("the caller went away");
    return absl::OkStatus();
  }
  std::string launching;  // the candidate named last
  std::vector<std::string> phases;
  int checkpoints = 0;
  int fail_at = 0;
};

// A correct kernel that records which candidate the hooks had been told of when it ran.
KernelFn Announced(const std::string& name, const RecordingHooks& hooks,
                   std::shared_ptr<std::vector<std::string>> unannounced) {
  return [=, &hooks](const GemmArgs& a) {
    if (hooks.launching != name) unannounced->push_back(name + " ran while told of \"" + hooks.launching + "\"");
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(5e-6);
    return absl::OkStatus();
  };
}

TEST_F(MeasurerTest, EveryKernelRunsOnlyAfterItsCandidateWasAnnouncedForThePhase) {
  RecordingHooks hooks;
  auto unannounced = std::make_shared<std::vector<std::string>>();
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("first", 2, Announced("first", hooks, unannounced)));
  c.push_back(FakeCandidate("second", 2, Announced("second", hooks, unannounced),
                            Determinism::kNondeterministic));
  absl::StatusOr<std::vector<Measurement>> m = MeasureWith(std::move(c), p_, &hooks);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(unannounced->empty()) << (*unannounced)[0];
  EXPECT_EQ(hooks.phases, (std::vector<std::string>{"first:oracle", "first:determinism",
                                                     "first:timing", "second:oracle",
                                                     "second:timing"}));
  // Before each candidate, after each phase that ran a kernel, and after every
  // timed sample but the last: 3 + 2 phases, 4 + 4 samples (stable at the 5th).
  ASSERT_EQ((*m)[0].result.samples, 5);
  ASSERT_EQ((*m)[1].result.samples, 5);
  EXPECT_EQ(hooks.checkpoints, 2 + 3 + 4 + 4);
}

TEST_F(MeasurerTest, AFailedCheckpointStopsTheMeasurementWithItsStatusAndRunsNothingMore) {
  RecordingHooks hooks;
  hooks.fail_at = 5;  // before the candidate, after its oracle and determinism runs, after
                      // its first timed sample, then here, after its second
  auto runs = std::make_shared<int>(0);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("only", 2, [runs](const GemmArgs& a) {
    ++*runs;
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  options_.stable_spread = -1;  // never stable: only the checkpoint can stop the sampling
  absl::StatusOr<std::vector<Measurement>> m = MeasureWith(std::move(c), p_, &hooks);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kCancelled) << m.status();
  // oracle + determinism + warm-up + two samples; nothing after the failed checkpoint.
  EXPECT_EQ(*runs, 2 + options_.warmup_runs + 2);
}

TEST_F(MeasurerTest, ASpentBucketBudgetKeepsTheSamplesTakenAndLeavesTheRestUnmeasured) {
  options_.bucket_budget_seconds = 0;  // spent as soon as the first candidate has one sample
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("first", 3, TimedKernel(10e-6)));
  c.push_back(FakeCandidate("second", 2, TimedKernel(1e-6)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].result.state, ResultState::kTimed) << m[0].result;
  EXPECT_EQ(m[0].result.samples, 1);
  EXPECT_DOUBLE_EQ(m[0].result.median_seconds, 10e-6);
  EXPECT_NE(m[0].result.reason.find("bucket's budget"), std::string::npos) << m[0].result;
  EXPECT_EQ(m[1].result.state, ResultState::kUnmeasured) << m[1].result;
  EXPECT_NE(m[1].result.reason.find("spent before its turn"), std::string::npos) << m[1].result;
}

}  // namespace
}  // namespace arbiter
