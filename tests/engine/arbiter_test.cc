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
#include "tests/engine/arbiter_fixture.h"
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
using testing::ArbiterTest;
using testing::ExpectConsistent;
using testing::OutageStore;
using testing::GatedKernel;

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

TEST_F(ArbiterTest, AsyncAnswersAtOnceAndMeasuresOnceUnderConcurrentRequests) {
  auto gate = std::make_shared<Gate>();
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("gated", 2, GatedKernel(gate, 5e-6)));
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
  c.push_back(FakeCandidate("gated", 2, GatedKernel(gate, 5e-6)));
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
  c.push_back(FakeCandidate("gated_on_q", 2,
                              GatedKernel(gate, 5e-6, [q](const Problem& p) { return p == q; })));
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

TEST_F(ArbiterTest, RememberedIsTheRememberedAnswerAloneAndNothingOnceItIsStale) {
  auto arbiter = Start(Standard());
  EXPECT_EQ(arbiter->Remembered(p_, Determinism::kNondeterministic), nullptr);
  EXPECT_EQ(arbiter->measurements(), 0) << "a lookup measured";
  ASSERT_TRUE(arbiter->SelectShared(p_, {}).ok());  // measures
  auto decided = arbiter->SelectShared(p_, {});     // decided from the stored verdict, remembered
  ASSERT_TRUE(decided.ok()) << decided.status();
  EXPECT_EQ(arbiter->Remembered(p_, Determinism::kNondeterministic), *decided);
  EXPECT_EQ(arbiter->Remembered(p_, Determinism::kBatchInvariant), nullptr)
      << "another determinism is another question";

  ASSERT_TRUE(arbiter->Force(p_, "vendor", "pin").ok());
  EXPECT_EQ(arbiter->Remembered(p_, Determinism::kNondeterministic), nullptr)
      << "remembered from before the force";
  EXPECT_EQ(arbiter->measurements(), 1);
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
