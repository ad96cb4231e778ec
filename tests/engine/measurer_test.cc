#include "engine/measurer.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/oracle.h"
#include "engine/selection.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_backend.h"

namespace arbiter {
namespace {

using testing::FakeBackend;
using testing::FakeCandidate;
using testing::FakeStream;
using testing::HostCostlyKernel;
using testing::NaiveGemm;
using testing::RoundScatteredKernel;
using testing::TimedKernel;

class MeasurerTest : public ::testing::Test {
 protected:
  MeasurerTest() {
    options_.min_samples = 5;
    options_.max_samples = 9;
    options_.warmup_runs = 1;
    // Host time never ends a race here: the fake device's time is the only clock tests read.
    options_.wall_budget_seconds = 1e9;
    options_.wall_limit_seconds = 1e9;
    options_.seed = 5;
  }
  // Races `p` over `candidates`, in the order given.
  absl::StatusOr<MeasureReport> Race(std::vector<CandidateSpec> candidates, const Problem& p) {
    auto registry = Registry::Create(std::move(candidates), backend_);
    EXPECT_TRUE(registry.ok()) << registry.status();
    registry_ = std::move(*registry);
    std::vector<const RegisteredCandidate*> order;
    for (const RegisteredCandidate& c : registry_->candidates()) order.push_back(&c);
    Measurer measurer(backend_, stream_, options_, hooks_);
    return measurer.Race(p, order);
  }
  // The measurements of Race, which must succeed.
  std::vector<Measurement> Measure(std::vector<CandidateSpec> candidates, const Problem& p) {
    absl::StatusOr<MeasureReport> r = Race(std::move(candidates), p);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->measurements : std::vector<Measurement>{};
  }

  MeasureHooks* hooks_ = nullptr;  // passed to the Measurer when set
  FakeBackend backend_;
  FakeStream stream_;
  MeasureOptions options_;
  std::unique_ptr<Registry> registry_;
  const Problem p_{DType::kF32, 24, 40, 64};
};

// A correct kernel of `seconds` (times an alternating +-jitter) that appends
// `name` to `log` each time it runs as a timed sample.
KernelFn LoggedKernel(std::string name, double seconds, double jitter,
                      std::shared_ptr<std::vector<std::string>> log) {
  auto calls = std::make_shared<int>(0);
  return [=](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    auto* stream = static_cast<FakeStream*>(a.stream);
    if (stream->timer_running()) log->push_back(name);
    stream->Advance(seconds * (((*calls)++ % 2 == 0) ? 1 + jitter : 1 - jitter));
    return absl::OkStatus();
  };
}

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

// Device time is what a race compares: without a hold, the flush before a sample
// is not waited for, so a launch that costs the host less than the flush takes
// hides behind it and the faster kernel wins. (Waiting put the launch in the
// window: 12 + 8 us read as slower than 1 + 10.)
TEST_F(MeasurerTest, WithoutAHoldACandidatesHostLaunchCostHidesBehindTheFlush) {
  options_.hold_launches = false;
  stream_.set_flush_seconds(30e-6);  // a read pass over twice the L2 takes about that
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("light_launch", 2, HostCostlyKernel(1e-6, 10e-6)));
  c.push_back(FakeCandidate("heavy_launch", 2, HostCostlyKernel(12e-6, 8e-6)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  for (const Measurement& x : m) ASSERT_EQ(x.result.state, ResultState::kTimed) << x.result;
  EXPECT_NEAR(m[0].result.median_seconds, 10e-6, 1e-12);
  EXPECT_NEAR(m[1].result.median_seconds, 8e-6, 1e-12);
}

// A launch that costs the host more than the flush takes (cuBLAS's cold path, a
// busy host) stays out of its sample too: the stream is held until the sample is
// enqueued. Without the hold the same race reads the heavy launch as slower.
TEST_F(MeasurerTest, AHeldSampleKeepsAHostLaunchLongerThanTheFlushOutOfTheWindow) {
  stream_.set_flush_seconds(2e-6);
  const auto race = [&] {
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("light_launch", 2, HostCostlyKernel(1e-6, 10e-6)));
    c.push_back(FakeCandidate("heavy_launch", 2, HostCostlyKernel(40e-6, 8e-6)));
    return Measure(std::move(c), p_);
  };
  std::vector<Measurement> m = race();
  ASSERT_EQ(m.size(), 2u);
  for (const Measurement& x : m) ASSERT_EQ(x.result.state, ResultState::kTimed) << x.result;
  EXPECT_NEAR(m[0].result.median_seconds, 10e-6, 1e-12);
  EXPECT_NEAR(m[1].result.median_seconds, 8e-6, 1e-12);
  EXPECT_TRUE(m[1].result.reason.empty()) << m[1].result;
  EXPECT_GT(stream_.holds(), 0);

  options_.hold_launches = false;
  m = race();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_NEAR(m[1].result.median_seconds, 8e-6 + 38e-6, 1e-12);  // the host's 40 less the flush's 2
}

// A hold that gives up (the launch waited for the device) is said in the result:
// its samples may carry the host-side cost again.
TEST_F(MeasurerTest, AHoldThatExpiredIsSaidAndNotTakenAgain) {
  stream_.set_holds_expire(true);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("syncs_in_launch", 2, HostCostlyKernel(1e-6, 10e-6)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 1u);
  ASSERT_EQ(m[0].result.state, ResultState::kTimed) << m[0].result;
  EXPECT_NE(m[0].result.reason.find("timed without the launch hold"), std::string::npos)
      << m[0].result;
  // Held once: every later hold would only stall a sample for the hold's bound.
  EXPECT_GT(m[0].result.samples, 1) << m[0].result;
  EXPECT_EQ(stream_.holds(), 1);
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

TEST_F(MeasurerTest, AHopelessCandidateCostsOneTimedRunAndSaysWhy) {
  // 100x the best's time in the round both were sampled in: one sample settles it.
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("quick", 2, TimedKernel(1e-6)));
  c.push_back(FakeCandidate("slow", 2, TimedKernel(100e-6)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].result.state, ResultState::kTimed) << m[1].result;
  EXPECT_EQ(m[1].result.samples, 1);
  EXPECT_DOUBLE_EQ(m[1].result.median_seconds, 100e-6);
  EXPECT_NE(m[1].result.reason.find("stopped early: 100x the best (quick) in round 0 and its "
                                    "oracle run over 10x; 1 sample"),
            std::string::npos)
      << m[1].result.reason;
  EXPECT_EQ(m[0].result.samples, options_.min_samples);
}

TEST_F(MeasurerTest, OneHopelessSampleAloneDoesNotStopACandidateWhoseOracleRunWasClose) {
  // 12us a run, but its first timed sample met a 200us hiccup: its oracle run
  // (the first run under the timer) disagrees, so it is sampled on.
  auto timed_runs = std::make_shared<int>(0);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("quick", 2, TimedKernel(10e-6)));
  c.push_back(FakeCandidate("hiccup", 2, [timed_runs](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    auto* stream = static_cast<FakeStream*>(a.stream);
    const bool timed = stream->timer_running();
    stream->Advance(timed && (*timed_runs)++ == 1 ? 200e-6 : 12e-6);
    return absl::OkStatus();
  }));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  ASSERT_GE(*timed_runs, 2) << "the hiccup must have been met";
  EXPECT_EQ(m[1].result.state, ResultState::kTimed) << m[1].result;
  EXPECT_GE(m[1].result.samples, options_.min_samples) << m[1].result;
  EXPECT_NEAR(m[1].result.median_seconds, 12e-6, 1e-9);
}

TEST_F(MeasurerTest, ACandidateSlowerButWithinTheHopelessFactorGetsItsMinimumSamples) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("quick", 2, TimedKernel(10e-6)));
  c.push_back(FakeCandidate("slower", 2, TimedKernel(50e-6)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].result.state, ResultState::kTimed) << m[1].result;
  EXPECT_EQ(m[1].result.samples, options_.min_samples) << m[1].result;
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

TEST_F(MeasurerTest, PairedTimingTakesOneSampleOfEachCandidatePerRound) {
  // Close and noisy, so neither stops before max_samples.
  auto log = std::make_shared<std::vector<std::string>>();
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("a", 2, LoggedKernel("a", 10e-6, 0.05, log)));
  c.push_back(FakeCandidate("b", 2, LoggedKernel("b", 10.2e-6, 0.05, log)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  ASSERT_EQ(m[0].result.samples, options_.max_samples) << m[0].result;
  ASSERT_EQ(m[1].result.samples, options_.max_samples) << m[1].result;
  // The first two are the checked runs (timed too: see the deferred claim tests).
  ASSERT_EQ(log->size(), 2u + 2u * options_.max_samples);
  log->erase(log->begin(), log->begin() + 2);
  std::set<std::string> firsts;
  for (size_t round = 0; round < log->size() / 2; ++round) {
    const std::string& x = (*log)[2 * round];
    const std::string& y = (*log)[2 * round + 1];
    EXPECT_NE(x, y) << "round " << round << " timed one candidate twice";
    firsts.insert(x);
  }
  EXPECT_EQ(firsts.size(), 2u) << "the same candidate went first in every round";
}

TEST_F(MeasurerTest, TheRacesRoundsTakeRoundOrder) {
  auto log = std::make_shared<std::vector<std::string>>();
  std::vector<CandidateSpec> c;
  const std::vector<std::string> names = {"a", "b", "c", "d"};
  for (size_t i = 0; i < names.size(); ++i) {
    // Close and noisy, so none stops before max_samples.
    c.push_back(FakeCandidate(names[i], 2,
                              LoggedKernel(names[i], 10e-6 * (1 + 0.01 * i), 0.05, log)));
  }
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), names.size());
  for (const Measurement& x : m) ASSERT_EQ(x.result.samples, options_.max_samples) << x.result;
  // The checked runs come first (timed too: see the deferred claim tests).
  ASSERT_EQ(log->size(), names.size() * (1 + options_.max_samples));
  for (int round = 0; round < options_.max_samples; ++round) {
    const std::vector<size_t> order = RoundOrder(names.size(), round);
    for (size_t j = 0; j < names.size(); ++j) {
      EXPECT_EQ((*log)[names.size() * (1 + round) + j], names[order[j]])
          << "round " << round << " position " << j;
    }
  }
}

TEST_F(MeasurerTest, DriftDuringTheRaceDoesNotPickAWinner) {
  // Two identical kernels on a device that slows with every launch: timed one
  // after the other, the first would look faster by more than the noise.
  stream_.set_drift(0.01);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("first", 2, TimedKernel(10e-6)));
  c.push_back(FakeCandidate("second", 2, TimedKernel(10e-6)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  std::vector<CandidateResult> results{m[0].result, m[1].result};
  const Decision d = Decide(results, Determinism::kNondeterministic, "second", NoisePolicy{});
  EXPECT_EQ(d.winner, "second") << d.reason;
  EXPECT_NE(d.reason.find("not separated"), std::string::npos) << d.reason;
}

TEST_F(MeasurerTest, DriftDoesNotPickAWinnerRoundByRoundEither) {
  // As above, decided on the per-round ratios: the round's order rotates, so
  // drift favours each candidate in turn and the ratios straddle 1.
  stream_.set_drift(0.01);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("first", 2, TimedKernel(10e-6)));
  c.push_back(FakeCandidate("second", 2, TimedKernel(10e-6)));
  const absl::StatusOr<MeasureReport> r = Race(std::move(c), p_);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<CandidateResult> results{r->measurements[0].result, r->measurements[1].result};
  const Decision d =
      Decide(results, Determinism::kNondeterministic, "second", NoisePolicy{}, &r->samples);
  EXPECT_EQ(d.winner, "second") << d.reason;
  EXPECT_NE(d.reason.find("not separated"), std::string::npos) << d.reason;
}

TEST_F(MeasurerTest, TheReportPairsEachCandidatesSamplesByRound) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("vendor", 3, RoundScatteredKernel(22.6e-6)));
  c.push_back(FakeCandidate("ours", 2, RoundScatteredKernel(14.4e-6)));
  const absl::StatusOr<MeasureReport> r = Race(std::move(c), p_);
  ASSERT_TRUE(r.ok()) << r.status();
  const CandidateResult& vendor = r->measurements[0].result;
  const CandidateResult& ours = r->measurements[1].result;
  ASSERT_TRUE(vendor.timed() && ours.timed()) << vendor << "; " << ours;
  ASSERT_GT(vendor.spread, 0.5) << "the spread the test means to plant";
  const PairedRatio paired = r->samples.Compare("vendor", "ours");
  EXPECT_EQ(paired.pairs, std::min(vendor.samples, ours.samples));
  EXPECT_GE(paired.pairs, options_.min_samples);
  EXPECT_NEAR(paired.median, 22.6 / 14.4, 1e-9);
  EXPECT_NEAR(paired.low, 22.6 / 14.4, 1e-9);  // the same ratio in every round
  EXPECT_NEAR(paired.high, 22.6 / 14.4, 1e-9);
  EXPECT_EQ(r->samples.min_pairs(), options_.min_samples);

  // Decided on each one's own spread, a 57% margin is noise; round by round, it is not.
  const std::vector<CandidateResult> results{vendor, ours};
  const Decision alone = Decide(results, Determinism::kNondeterministic, std::nullopt,
                                NoisePolicy{});
  EXPECT_EQ(alone.winner, "vendor") << alone.reason;
  const Decision d = Decide(results, Determinism::kNondeterministic, std::nullopt, NoisePolicy{},
                            &r->samples);
  EXPECT_EQ(d.winner, "ours") << d.reason;
  EXPECT_NE(d.reason.find("paired over"), std::string::npos) << d.reason;
}

TEST_F(MeasurerTest, ACandidateThatCannotWinStopsAtTheMinimumSamples) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("quick", 2, TimedKernel(10e-6, 0.05)));
  c.push_back(FakeCandidate("slower", 2, TimedKernel(14e-6, 0.05)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].result.samples, options_.max_samples) << m[0].result;
  EXPECT_EQ(m[1].result.state, ResultState::kTimed);
  EXPECT_EQ(m[1].result.samples, options_.min_samples) << m[1].result;
  EXPECT_NE(m[1].result.reason.find("cannot win"), std::string::npos) << m[1].result.reason;
}

TEST_F(MeasurerTest, TheDeviceTimeBudgetEndsTheRaceAfterTheMinimumSamples) {
  options_.max_samples = 50;
  options_.device_budget_seconds = 50e-6;  // spent within the first few rounds
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("a", 2, TimedKernel(10e-6, 0.05)));
  c.push_back(FakeCandidate("b", 2, TimedKernel(10.2e-6, 0.05)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  for (const Measurement& x : m) {
    EXPECT_EQ(x.result.state, ResultState::kTimed);
    EXPECT_EQ(x.result.samples, options_.min_samples) << x.result;
    EXPECT_NE(x.result.reason.find("device-time budget spent"), std::string::npos) << x.result;
  }
}

TEST_F(MeasurerTest, TheHostTimeBudgetEndsTheRaceAfterTheMinimumSamples) {
  options_.wall_budget_seconds = 0;  // spent as soon as the first round is over
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("a", 2, TimedKernel(10e-6, 0.05)));
  c.push_back(FakeCandidate("b", 2, TimedKernel(10.2e-6, 0.05)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  for (const Measurement& x : m) {
    EXPECT_EQ(x.result.state, ResultState::kTimed);
    EXPECT_EQ(x.result.samples, options_.min_samples) << x.result;
    EXPECT_NE(x.result.reason.find("host-time budget spent"), std::string::npos) << x.result;
  }
}

TEST_F(MeasurerTest, AVerySlowCandidateStopsOnceItHasSpentItsShareOfTheBudget) {
  options_.device_budget_seconds = 1e-3;  // a share of 0.5 ms each
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("quick", 2, TimedKernel(1e-6)));
  c.push_back(FakeCandidate("generic", 1, TimedKernel(5e-3)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].result.state, ResultState::kTimed);
  EXPECT_EQ(m[1].result.samples, 1) << m[1].result;
  EXPECT_NE(m[1].result.reason.find("over 10x the best median"), std::string::npos)
      << m[1].result.reason;
}

TEST_F(MeasurerTest, CancellationStopsTheRaceBetweenRunsWithNothingReturned) {
  int launches = 0;
  int launches_when_cancelled = -1;
  options_.cancelled = [&] {
    if (launches >= 7 && launches_when_cancelled < 0) launches_when_cancelled = launches;
    return launches_when_cancelled >= 0;
  };
  KernelFn counted = [&](const GemmArgs& a) {
    ++launches;
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(10e-6);
    return absl::OkStatus();
  };
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("a", 2, counted));
  c.push_back(FakeCandidate("b", 2, counted));
  absl::StatusOr<MeasureReport> r = Race(std::move(c), p_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(launches, launches_when_cancelled) << "a kernel ran after cancellation";
}

TEST_F(MeasurerTest, AnUnwrittenElementOutsideTheCheckedRowsStillFailsTheOracle) {
  const Problem tall{DType::kF32, 300, 16, 8};
  options_.oracle_full_volume = 0;  // rows sampled however cheap the reference is
  const std::vector<int64_t> checked = SampledRows(tall.m, options_.oracle_rows);
  ASSERT_LT(checked.size(), static_cast<size_t>(tall.m));
  int64_t unchecked = 0;
  while (std::binary_search(checked.begin(), checked.end(), unchecked)) ++unchecked;
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("one_hole", 2, [unchecked](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    FillNaN(a.problem.dtype, static_cast<float*>(a.c) + unchecked * a.problem.n + 3, 1);
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  absl::StatusOr<MeasureReport> r = Race(std::move(c), tall);
  ASSERT_TRUE(r.ok()) << r.status();
  const CandidateResult& result = r->measurements[0].result;
  EXPECT_EQ(result.state, ResultState::kFailedOracle) << result;
  EXPECT_NE(result.reason.find("1 of 4800 elements of C non-finite"), std::string::npos)
      << result.reason;
  EXPECT_EQ(r->cost.rows_checked, static_cast<int64_t>(checked.size()));
}

TEST_F(MeasurerTest, AWrongValueInACheckedRowFailsWithItsPositionInC) {
  const Problem tall{DType::kF32, 300, 16, 8};
  options_.oracle_full_volume = 0;
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("last_row_off", 2, [](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<float*>(a.c)[(a.problem.m - 1) * a.problem.n + 5] += 1.0f;
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  absl::StatusOr<MeasureReport> r = Race(std::move(c), tall);
  ASSERT_TRUE(r.ok()) << r.status();
  const CandidateResult& result = r->measurements[0].result;
  EXPECT_EQ(result.state, ResultState::kFailedOracle) << result;
  EXPECT_NE(result.reason.find("C[299,5]"), std::string::npos) << result.reason;
}

TEST_F(MeasurerTest, EveryRowIsCheckedWhileTheFullReferenceIsCheap) {
  const Problem tall{DType::kF32, 300, 16, 8};  // M past oracle_rows, volume far below the bound
  const std::vector<int64_t> sampled = SampledRows(tall.m, options_.oracle_rows);
  int64_t unsampled = 0;
  while (std::binary_search(sampled.begin(), sampled.end(), unsampled)) ++unsampled;
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("one_off", 2, [unsampled](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<float*>(a.c)[unsampled * a.problem.n + 7] += 1.0f;
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  absl::StatusOr<MeasureReport> r = Race(std::move(c), tall);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->measurements[0].result.state, ResultState::kFailedOracle);
  EXPECT_NE(r->measurements[0].result.reason.find(absl::StrCat("C[", unsampled, ",7]")),
            std::string::npos)
      << r->measurements[0].result.reason;
  EXPECT_EQ(r->cost.rows_checked, tall.m);
}

TEST_F(MeasurerTest, TheReportSaysWhereTheTimeWentAndHowManyRoundsRan) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("steady", 2, TimedKernel(10e-6)));
  absl::StatusOr<MeasureReport> r = Race(std::move(c), p_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cost.rounds, options_.min_samples);
  EXPECT_DOUBLE_EQ(r->cost.device, options_.min_samples * 10e-6);
  EXPECT_EQ(r->cost.rows_checked, p_.m);  // M <= oracle_rows: every row
  std::vector<std::string> phases;
  for (const auto& [name, seconds] : r->cost.Phases()) phases.push_back(name);
  EXPECT_EQ(phases, (std::vector<std::string>{"setup", "reference", "oracle", "determinism",
                                              "warmup", "flush", "timing"}));
  EXPECT_EQ(r->sm_clock_min_mhz, 0.0);  // the fake device reports no clock
}

// Records what the measurer announces; the n-th checkpoint (from 1) fails when `fail_at` is set.
class RecordingHooks final : public MeasureHooks {
 public:
  void Launching(const CandidateSpec& candidate, std::string_view phase) override {
    launching = candidate.name;
    phases.insert(candidate.name + ":" + std::string(phase));
  }
  absl::Status Checkpoint() override {
    ++checkpoints;
    if (fail_at > 0 && checkpoints >= fail_at) return absl::CancelledError("the caller went away");
    return absl::OkStatus();
  }
  std::string launching;  // the candidate named last
  std::set<std::string> phases;
  int checkpoints = 0;
  int fail_at = 0;
};

// A correct kernel that records when the hooks had not been told of its candidate last.
KernelFn Announced(const std::string& name, const RecordingHooks& hooks,
                   std::shared_ptr<std::vector<std::string>> unannounced) {
  return [=, &hooks](const GemmArgs& a) {
    if (hooks.launching != name) {
      unannounced->push_back(name + " ran while told of \"" + hooks.launching + "\"");
    }
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(5e-6);
    return absl::OkStatus();
  };
}

TEST_F(MeasurerTest, EveryKernelRunsOnlyAfterItsCandidateWasAnnouncedForThePhase) {
  RecordingHooks hooks;
  hooks_ = &hooks;
  auto unannounced = std::make_shared<std::vector<std::string>>();
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("first", 2, Announced("first", hooks, unannounced)));
  c.push_back(FakeCandidate("second", 2, Announced("second", hooks, unannounced)));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].result.state, ResultState::kTimed) << m[0].result;
  EXPECT_TRUE(unannounced->empty()) << (*unannounced)[0];
  EXPECT_EQ(hooks.phases, (std::set<std::string>{"first:oracle", "first:determinism",
                                                  "first:timing", "second:oracle",
                                                  "second:determinism", "second:timing"}));
  EXPECT_GT(hooks.checkpoints, m[0].result.samples);  // at least one before each sample
}

TEST_F(MeasurerTest, AFailedCheckpointStopsTheMeasurementWithItsStatusAndRunsNothingMore) {
  RecordingHooks hooks;
  hooks.fail_at = 5;  // before the candidate, after its oracle run, before the warm-up,
                      // before its first timed sample, then here, before its second
  hooks_ = &hooks;
  auto runs = std::make_shared<int>(0);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("only", 2, [runs](const GemmArgs& a) {
    ++*runs;
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  options_.stable_spread = -1;  // never stable: only the checkpoint can stop the sampling
  const absl::StatusOr<MeasureReport> r = Race(std::move(c), p_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  // oracle + determinism + warm-up + one sample; nothing after the failed checkpoint.
  EXPECT_EQ(*runs, 2 + options_.warmup_runs + 1);
}

// A device fault is seen at the next checkpoint (the Tuner's checks the device's
// health); the candidate named last then is the one blamed.
class FaultingDeviceHooks final : public MeasureHooks {
 public:
  void Launching(const CandidateSpec& candidate, std::string_view) override {
    launching = candidate.name;
  }
  absl::Status Checkpoint() override {
    if (!device_faulted) return absl::OkStatus();
    blamed = launching;
    return absl::UnavailableError("device fault");
  }
  std::string launching;
  std::string blamed;  // named when the fault was seen
  bool device_faulted = false;
};

TEST_F(MeasurerTest, AFaultInTheLastCandidatesOracleRunIsSeenBeforeAnotherCandidateIsNamed) {
  FaultingDeviceHooks hooks;
  hooks_ = &hooks;
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("healthy", 2, TimedKernel(10e-6)));
  c.push_back(FakeCandidate("faulting", 1, [&hooks](const GemmArgs&) {
    hooks.device_faulted = true;  // as an illegal address: the run fails, the device is gone
    return absl::InternalError("an illegal memory access was encountered");
  }));
  const absl::StatusOr<MeasureReport> r = Race(std::move(c), p_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(hooks.blamed, "faulting");
}

// A correct kernel of `first` device seconds on its first run and `later` after
// (as a module loaded on first launch looks), that counts its runs and, when
// `flaky`, perturbs one element of C on every second run.
KernelFn CountedKernel(double first, double later, std::shared_ptr<int> runs, bool flaky = false) {
  return [=](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m);
    if (flaky && *runs % 2 == 1) static_cast<float*>(a.c)[0] *= 1.0000001f;
    static_cast<FakeStream*>(a.stream)->Advance((*runs)++ == 0 ? first : later);
    return absl::OkStatus();
  };
}

TEST_F(MeasurerTest, ASlowCandidateBehindAFasterOneWithItsClaimRunsForTheOracleAndOneSampleOnly) {
  options_.warmup_runs = 0;
  options_.device_budget_seconds = 1e-3;
  auto slow_runs = std::make_shared<int>(0);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("quick", 3, TimedKernel(1e-6), Determinism::kBatchInvariant));
  c.push_back(FakeCandidate("generic", 1, CountedKernel(5e-3, 5e-3, slow_runs),
                            Determinism::kBatchInvariant));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(*slow_runs, 2) << "the oracle's run and one timed sample";
  EXPECT_EQ(m[1].result.state, ResultState::kTimed) << m[1].result;
  EXPECT_FALSE(m[1].claim_violation);
  // Its claim went unchecked, so no request that needs it is served by it.
  EXPECT_EQ(m[1].result.determinism, Determinism::kNondeterministic) << m[1].result;
  EXPECT_NE(m[1].result.reason.find("batch_invariant claim not checked"), std::string::npos)
      << m[1].result.reason;
  EXPECT_EQ(m[0].result.determinism, Determinism::kBatchInvariant);
  std::vector<CandidateResult> results{m[0].result, m[1].result};
  EXPECT_EQ(Decide(results, Determinism::kBatchInvariant, std::nullopt, NoisePolicy{}).winner,
            "quick");
}

TEST_F(MeasurerTest, ASlowCandidateIsStillCheckedWhereNoFasterOneHoldsItsClaim) {
  // quick claims nothing, so generic's run_to_run claim is checked, and disproved.
  auto slow_runs = std::make_shared<int>(0);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("quick", 3, TimedKernel(1e-6), Determinism::kNondeterministic));
  c.push_back(FakeCandidate("generic", 1, CountedKernel(5e-3, 5e-3, slow_runs, /*flaky=*/true),
                            Determinism::kRunToRun));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE(m[1].claim_violation) << m[1].result;
  EXPECT_EQ(m[1].result.state, ResultState::kQuarantined);
}

TEST_F(MeasurerTest, ASlowWrongCandidateStillFailsTheOracle) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("quick", 3, TimedKernel(1e-6), Determinism::kBatchInvariant));
  c.push_back(FakeCandidate("skips_k", 1, [](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k - 1, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(5e-3);
    return absl::OkStatus();
  }, Determinism::kBatchInvariant));
  c.push_back(FakeCandidate("half_written", 1, [](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k, a.problem.m / 2);
    static_cast<FakeStream*>(a.stream)->Advance(5e-3);
    return absl::OkStatus();
  }, Determinism::kBatchInvariant));
  const std::vector<Measurement> m = Measure(std::move(c), p_);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].result.state, ResultState::kFailedOracle) << m[1].result;
  EXPECT_EQ(m[2].result.state, ResultState::kFailedOracle) << m[2].result;
}

TEST_F(MeasurerTest, ADeferredClaimIsCheckedWhenTheRaceShowsTheCandidateCanWin) {
  // Its first run is slow (a module loading), later runs are the fastest: the race
  // shows it, so its claim is checked after all - and here it does not hold.
  for (bool flaky : {false, true}) {
    auto runs = std::make_shared<int>(0);
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("steady", 3, TimedKernel(2e-6), Determinism::kRunToRun));
    c.push_back(FakeCandidate("late_loader", 2, CountedKernel(5e-3, 1e-6, runs, flaky),
                              Determinism::kRunToRun));
    const std::vector<Measurement> m = Measure(std::move(c), p_);
    ASSERT_EQ(m.size(), 2u);
    const CandidateResult& r = m[1].result;
    if (flaky) {
      EXPECT_TRUE(m[1].claim_violation) << r;
      EXPECT_EQ(r.state, ResultState::kQuarantined) << r;
    } else {
      EXPECT_FALSE(m[1].claim_violation) << r;
      EXPECT_EQ(r.state, ResultState::kTimed) << r;
      EXPECT_EQ(r.determinism, Determinism::kRunToRun) << r;
      std::vector<CandidateResult> results{m[0].result, r};
      EXPECT_EQ(Decide(results, Determinism::kRunToRun, std::nullopt, NoisePolicy{}).winner,
                "late_loader");
    }
  }
}

// Close races (MeasureOptions::extend): `a` 10us and `b` 9.6us in every round,
// 10 rounds each, and a CloseRace that names them both until `settle_at` rounds
// are paired (never, where 0).
CloseRace BothUntilPaired(int settle_at) {
  return [settle_at](const std::vector<Measurement>&, const RaceSamples& samples) {
    if (settle_at > 0 && samples.Compare("a", "b").pairs >= settle_at) {
      return std::vector<std::string>{};
    }
    return std::vector<std::string>{"a", "b"};
  };
}
std::vector<CandidateSpec> TwoSteady() {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("a", 3, TimedKernel(10e-6)));
  c.push_back(FakeCandidate("b", 2, TimedKernel(9.6e-6)));
  return c;
}

TEST_F(MeasurerTest, ACloseRaceIsTimedInMoreRoundsUntilItSettles) {
  options_.min_samples = options_.max_samples = 10;
  options_.extend = BothUntilPaired(13);
  const absl::StatusOr<MeasureReport> r = Race(TwoSteady(), p_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->extension.rounds, 3);
  EXPECT_EQ(r->extension.ended, "settled");
  EXPECT_EQ(r->cost.rounds, 13);
  EXPECT_EQ(r->measurements[0].result.samples, 13);
  EXPECT_EQ(r->measurements[1].result.samples, 13);
  EXPECT_EQ(r->samples.Compare("a", "b").pairs, 13) << "the extra rounds are paired too";
  EXPECT_NEAR(r->extension.device_seconds, 3 * 19.6e-6, 1e-12);
  EXPECT_NE(r->extension.ToString().find("a and b timed 3 more paired rounds"), std::string::npos)
      << r->extension.ToString();
}

TEST_F(MeasurerTest, ACloseRaceGetsAtMostExtendRoundsTimesTheRoundsItRan) {
  options_.min_samples = options_.max_samples = 10;
  options_.extend = BothUntilPaired(0);
  for (double times : {1.0, 2.5}) {
    options_.extend_rounds = times;
    const absl::StatusOr<MeasureReport> r = Race(TwoSteady(), p_);
    ASSERT_TRUE(r.ok()) << r.status();
    const int more = static_cast<int>(10 * times);
    EXPECT_EQ(r->extension.rounds, more);
    EXPECT_EQ(r->cost.rounds, 10 + more);
    EXPECT_NE(r->extension.ended.find(absl::StrCat("not settled within ", more, " more rounds")),
              std::string::npos)
        << r->extension.ended;
  }
}

TEST_F(MeasurerTest, ACloseRaceIsNeverExtendedPastTheRacesDeviceBudget) {
  options_.min_samples = options_.max_samples = 10;
  options_.extend = BothUntilPaired(0);
  // The race's 10 rounds take 196us; each more round 19.6us.
  for (double budget : {196e-6, 200e-6, 260e-6, 300e-6}) {
    options_.device_budget_seconds = budget;
    const absl::StatusOr<MeasureReport> r = Race(TwoSteady(), p_);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LE(r->cost.device, budget + 1e-12) << budget;
    EXPECT_LT(r->extension.rounds, 10) << budget;
    EXPECT_GT(r->cost.device + 19.6e-6, budget) << budget << ": one more round would have fit";
    EXPECT_NE(r->extension.ended.find("device budget"), std::string::npos) << r->extension.ended;
  }
}

TEST_F(MeasurerTest, ARaceThatIsNotCloseGetsNoMoreRounds) {
  options_.min_samples = options_.max_samples = 10;
  options_.extend = BothUntilPaired(1);  // settled from the start
  absl::StatusOr<MeasureReport> r = Race(TwoSteady(), p_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->extension.candidates.empty());
  EXPECT_EQ(r->extension.ToString(), "");
  EXPECT_EQ(r->cost.rounds, 10);
  options_.extend = BothUntilPaired(0);
  options_.extend_rounds = 0;  // extension off
  r = Race(TwoSteady(), p_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cost.rounds, 10);
}

}  // namespace
}  // namespace arbiter
