#include "engine/tuner.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "engine/refinement.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_engine.h"

namespace arbiter {
namespace {

using testing::Eventually;
using testing::FakeEngine;
using testing::FakeCandidate;
using testing::FakeStream;
using testing::Gate;
using testing::NaiveGemm;
using testing::TimedKernel;
using testing::GatedKernel;

template <typename T>
bool Ready(const std::future<T>& f) {
  return f.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
}

// A caller that goes away when `gone` turns true.
CallContext Leaving(std::shared_ptr<std::atomic<bool>> gone, std::string peer = "") {
  CallContext caller;
  caller.cancelled = [gone] { return gone->load(); };
  caller.peer = std::move(peer);
  return caller;
}

class TunerTest : public ::testing::Test {
 protected:
  void Start(std::vector<CandidateSpec> candidates) {
    ASSERT_TRUE(engine_.Start(std::move(candidates)).ok());
    tuner_ = std::make_unique<Tuner>(options_, engine_.backend, *engine_.registry, *engine_.store,
                                     node_verdicts_, *engine_.streams, *engine_.quarantine,
                                     cache_, journal_.get());
  }
  void TearDown() override {
    gate_->Open();  // a test that failed half-way must not leave the measuring thread blocked
    tuner_.reset();
  }

  // Whether a verdict for `p`'s bucket is stored.
  bool Stored(const Problem& p) {
    return engine_.store->GetVerdict(engine_.fingerprint(), p.dtype, BucketOf(p)).ok();
  }
  // MeasureOnce on another thread.
  std::future<absl::StatusOr<Verdict>> MeasureInBackground(const Problem& p,
                                                           CallContext caller = {}) {
    return std::async(std::launch::async, [this, p, caller] { return tuner_->MeasureOnce(p, caller); });
  }
  // A candidate whose every kernel waits at gate_.
  CandidateSpec Gated(const std::string& name = "gated") {
    return FakeCandidate(name, 2, GatedKernel(gate_));
  }

  TunerOptions options_ = [] {
    TunerOptions o;
    o.measure.min_samples = 5;
    o.measure.max_samples = 9;
    o.measure.warmup_runs = 1;
    return o;
  }();
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::unique_ptr<IntentJournal> journal_;  // set before Start to keep one
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

TEST_F(TunerTest, ACallerThatFoundNoVerdictJustBeforeOneWasStoredIsAnsweredWithIt) {
  // The arbiter looks for a verdict, then asks the tuner: a job that finished in between
  // has already stored the bucket's verdict, and a second race would be wasted work.
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("fast", 1, TimedKernel(10e-6)));
  c.push_back(FakeCandidate("vendor", 3, TimedKernel(100e-6)));
  Start(std::move(c));
  absl::StatusOr<Verdict> first = tuner_->MeasureOnce(p_);
  ASSERT_TRUE(first.ok()) << first.status();
  const Problem late_shape{DType::kF32, 32, 48, 56};
  ASSERT_EQ(BucketOf(late_shape), BucketOf(p_));
  absl::StatusOr<Verdict> late = tuner_->MeasureOnce(late_shape);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->created_unix, first->created_unix);
  EXPECT_EQ(late->measured, p_) << "the stored verdict, not a new race at the late caller's shape";
  EXPECT_EQ(tuner_->measurements(), 1);
  absl::StatusOr<Verdict> tuned = tuner_->MeasureOnce(p_, {}, MeasureCall{.remeasure = true});
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuner_->measurements(), 2) << "an operator's tune measures over a fresh verdict";
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
  ASSERT_TRUE(tuner_->Enqueue(p_).ok());
  ASSERT_TRUE(tuner_->Enqueue(p_).ok());
  ASSERT_TRUE(tuner_->Enqueue(Problem{DType::kF32, 32, 48, 56}).ok());  // the bucket, another shape
  tuner_->WaitIdle();
  EXPECT_EQ(tuner_->measurements(), 1);
  EXPECT_TRUE(cache_.Get(BucketKeyOf(p_)).has_value());
}

TEST_F(TunerTest, ACallerThatGivesUpLeavesAtOnceAndAMeasurementNobodyWaitsForIsDropped) {
  std::vector<CandidateSpec> c;
  c.push_back(Gated());
  Start(std::move(c));
  auto gone = std::make_shared<std::atomic<bool>>(false);
  auto caller = MeasureInBackground(p_, Leaving(gone));
  gate_->WaitEntered();  // measuring, its kernel held at the gate

  gone->store(true);
  ASSERT_TRUE(Ready(caller)) << "the caller stayed while its measurement ran";
  EXPECT_EQ(caller.get().status().code(), absl::StatusCode::kCancelled);
  gate_->Open();  // the kernel returns; the measurement stops at its next checkpoint
  tuner_->WaitIdle();
  EXPECT_EQ(tuner_->measurements(), 0);
  EXPECT_FALSE(Stored(p_));
}

TEST_F(TunerTest, AQueuedMeasurementNobodyWaitsForLeavesTheQueue) {
  std::vector<CandidateSpec> c;
  c.push_back(Gated());
  Start(std::move(c));
  auto first = MeasureInBackground(p_);
  gate_->WaitEntered();
  const Problem other{DType::kF32, 100, 100, 100};
  auto gone = std::make_shared<std::atomic<bool>>(false);
  auto queued = MeasureInBackground(other, Leaving(gone));
  ASSERT_TRUE(Eventually([&] { return tuner_->queued() == 2; }));

  gone->store(true);
  ASSERT_TRUE(Ready(queued));
  EXPECT_EQ(queued.get().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(tuner_->queued(), 1u);  // off the queue while the first one still runs
  gate_->Open();
  EXPECT_TRUE(first.get().ok());
  tuner_->WaitIdle();
  EXPECT_EQ(tuner_->measurements(), 1);
  EXPECT_FALSE(Stored(other));
}

TEST_F(TunerTest, ABackgroundMeasurementOutlivesACallerThatGaveUp) {
  std::vector<CandidateSpec> c;
  c.push_back(Gated());
  Start(std::move(c));
  ASSERT_TRUE(tuner_->Enqueue(p_).ok());
  auto gone = std::make_shared<std::atomic<bool>>(false);
  auto caller = MeasureInBackground(p_, Leaving(gone));  // joins the background entry
  gate_->WaitEntered();
  gone->store(true);
  ASSERT_TRUE(Ready(caller));
  EXPECT_EQ(caller.get().status().code(), absl::StatusCode::kCancelled);
  gate_->Open();
  tuner_->WaitIdle();
  EXPECT_EQ(tuner_->measurements(), 1);
  EXPECT_TRUE(Stored(p_));
}

TEST_F(TunerTest, TheQueueIsBoundedInBucketsAndPerPeerNamingTheLimit) {
  options_.max_queued = 2;
  options_.max_queued_per_peer = 1;
  std::vector<CandidateSpec> c;
  c.push_back(Gated());
  Start(std::move(c));
  CallContext a;
  a.peer = "ipv4:10.0.0.1";
  auto running = MeasureInBackground(p_, a);
  gate_->WaitEntered();

  const absl::Status per_peer = tuner_->Enqueue(Problem{DType::kF32, 100, 100, 100}, a.peer);
  EXPECT_EQ(per_peer.code(), absl::StatusCode::kResourceExhausted) << per_peer;
  EXPECT_NE(per_peer.message().find("(limit 1)"), std::string::npos) << per_peer;
  EXPECT_NE(per_peer.message().find("ipv4:10.0.0.1"), std::string::npos) << per_peer;
  ASSERT_TRUE(tuner_->Enqueue(Problem{DType::kF32, 100, 100, 100}, "ipv4:10.0.0.2").ok());
  const absl::Status full = tuner_->Enqueue(Problem{DType::kF32, 300, 300, 300}, "ipv4:10.0.0.3");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("tuning queue full"), std::string::npos) << full;
  EXPECT_NE(full.message().find("(limit 2)"), std::string::npos) << full;

  gate_->Open();
  EXPECT_TRUE(running.get().ok());
  tuner_->WaitIdle();
  // Done entries no longer count against their peer.
  EXPECT_TRUE(tuner_->Enqueue(Problem{DType::kF32, 300, 300, 300}, a.peer).ok());
}

TEST_F(TunerTest, ShutdownDropsTheQueueAndStopsTheRunningMeasurementAtItsNextCheckpoint) {
  std::vector<CandidateSpec> c;
  c.push_back(Gated());
  Start(std::move(c));
  auto running = MeasureInBackground(p_);
  gate_->WaitEntered();
  const Problem other{DType::kF32, 100, 100, 100};
  auto queued = MeasureInBackground(other);
  ASSERT_TRUE(Eventually([&] { return tuner_->queued() == 2; }));

  tuner_->Shutdown();
  ASSERT_TRUE(Ready(queued));  // dropped at once, though the kernel is still held
  EXPECT_EQ(queued.get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(tuner_->MeasureOnce(Problem{DType::kF32, 300, 300, 300}).status().code(),
            absl::StatusCode::kUnavailable);
  gate_->Open();
  EXPECT_EQ(running.get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(tuner_->WaitStopped(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(tuner_->measurements(), 0);
  EXPECT_FALSE(Stored(p_));
}

// Refinements are jobs of the one measuring thread too: a background one waits
// behind every other job, is apart from its bucket's job, and is dropped at shutdown.
class TunerRefinementTest : public TunerTest {
 protected:
  // "fast" wins p_'s bucket; "vendor" is the tier default. Every kernel run is
  // recorded in `runs_`; a kernel at `blocker_` waits at the gate.
  void StartMeasured() {
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("fast", 1, Recorded(TimedKernel(10e-6))));
    c.push_back(FakeCandidate("vendor", 3, Recorded(TimedKernel(100e-6))));
    Start(std::move(c));
    ASSERT_TRUE(tuner_->MeasureOnce(p_).ok());
    runs_->clear();
  }
  KernelFn Recorded(KernelFn run) {
    return [this, run](const GemmArgs& a) {
      {
        std::lock_guard lock(runs_mu_);
        runs_->push_back(a.problem);
      }
      if (a.problem == blocker_) gate_->Pass();
      return run(a);
    };
  }
  // Where `p` first ran among the recorded runs (-1: never).
  int FirstRun(const Problem& p) {
    std::lock_guard lock(runs_mu_);
    for (size_t i = 0; i < runs_->size(); ++i) {
      if ((*runs_)[i] == p) return static_cast<int>(i);
    }
    return -1;
  }
  const Verdict* Refinement(const std::optional<Verdict>& bucket, const Problem& p) {
    return bucket ? RefinementOf(*bucket, p) : nullptr;
  }

  std::mutex runs_mu_;
  std::shared_ptr<std::vector<Problem>> runs_ = std::make_shared<std::vector<Problem>>();
  const Problem blocker_{DType::kF32, 8, 8, 8};  // another bucket
  const Problem shape_{DType::kF32, 32, 48, 56};       // p_'s bucket, another shape
};

TEST_F(TunerRefinementTest, ABackgroundRefinementRunsAfterEveryOtherQueuedMeasurement) {
  ASSERT_NO_FATAL_FAILURE(StartMeasured());
  auto blocking = MeasureInBackground(blocker_);
  gate_->WaitEntered();  // the measuring thread is busy
  tuner_->EnqueueRefinement(shape_);
  const Problem later{DType::kF32, 16, 16, 16};
  ASSERT_TRUE(tuner_->Enqueue(later).ok());  // queued after the refinement
  // The refinement and its bucket's job are apart: the bucket's joins neither.
  ASSERT_TRUE(tuner_->Enqueue(shape_).ok());
  EXPECT_EQ(tuner_->queued(), 4u);

  gate_->Open();
  EXPECT_TRUE(blocking.get().ok());
  tuner_->WaitIdle();
  ASSERT_GE(FirstRun(shape_), 0) << "the refinement never ran";
  ASSERT_GE(FirstRun(later), 0);
  EXPECT_LT(FirstRun(later), FirstRun(shape_)) << "the refinement ran before a bucket's measurement";
  absl::StatusOr<std::optional<Verdict>> bucket = tuner_->LoadBucket(BucketKeyOf(p_));
  ASSERT_TRUE(bucket.ok()) << bucket.status();
  const Verdict* refined = Refinement(*bucket, shape_);
  ASSERT_NE(refined, nullptr) << "the refinement was not stored";
  EXPECT_EQ(refined->measured, shape_);
  EXPECT_EQ((*bucket)->measured, p_) << "the bucket's background job measured it again";
}

TEST_F(TunerRefinementTest, ShutdownDropsAQueuedRefinement) {
  ASSERT_NO_FATAL_FAILURE(StartMeasured());
  auto blocking = MeasureInBackground(blocker_);
  gate_->WaitEntered();
  tuner_->EnqueueRefinement(shape_);
  ASSERT_EQ(tuner_->queued(), 2u);

  tuner_->Shutdown();
  EXPECT_EQ(tuner_->queued(), 1u);  // only the running measurement is left
  tuner_->EnqueueRefinement(shape_);  // refused once shutting down
  EXPECT_EQ(tuner_->queued(), 1u);
  gate_->Open();
  blocking.get();
  EXPECT_TRUE(tuner_->WaitStopped(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(FirstRun(shape_), -1);
}

TEST_F(TunerRefinementTest, BackgroundRefinementsAreBoundedApartFromTheQueue) {
  options_.max_queued = 2;
  options_.max_queued_refinements = 1;
  ASSERT_NO_FATAL_FAILURE(StartMeasured());
  auto blocking = MeasureInBackground(blocker_);
  gate_->WaitEntered();
  tuner_->EnqueueRefinement(shape_);
  tuner_->EnqueueRefinement(Problem{DType::kF32, 24, 48, 56});  // past the bound: dropped
  EXPECT_EQ(tuner_->queued(), 2u);
  // Refinements do not take the places of buckets with no verdict.
  EXPECT_TRUE(tuner_->Enqueue(Problem{DType::kF32, 16, 16, 16}).ok());
  gate_->Open();
  blocking.get();
  tuner_->WaitIdle();
  EXPECT_GE(FirstRun(shape_), 0);
  EXPECT_EQ(FirstRun(Problem{DType::kF32, 24, 48, 56}), -1);
}

TEST_F(TunerRefinementTest, ARefinementNobodyWaitsForAnyMoreIsDropped) {
  ASSERT_NO_FATAL_FAILURE(StartMeasured());
  auto blocking = MeasureInBackground(blocker_);
  gate_->WaitEntered();
  auto gone = std::make_shared<std::atomic<bool>>(false);
  auto tune = std::async(std::launch::async, [this, gone] {
    return tuner_->Refine(shape_, Leaving(gone), MeasureCall{.remeasure = true});
  });
  ASSERT_TRUE(Eventually([&] { return tuner_->queued() == 2; }));
  gone->store(true);
  ASSERT_TRUE(Ready(tune));
  EXPECT_EQ(tune.get().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(tuner_->queued(), 1u);
  gate_->Open();
  blocking.get();
  tuner_->WaitIdle();
  EXPECT_EQ(FirstRun(shape_), -1);
}

class TunerFaultTest : public TunerTest {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("tuner_fault_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove(path_);
    auto journal = IntentJournal::Open(path_.string());
    ASSERT_TRUE(journal.ok()) << journal.status();
    journal_ = std::move(*journal);
    options_.on_fault = [faults = faults_](const absl::Status& s) { faults->set_value(s); };
  }
  void TearDown() override {
    TunerTest::TearDown();
    journal_.reset();
    std::filesystem::remove(path_);
  }
  // What a restarted daemon reads from the journal.
  std::optional<Intent> Leftover() {
    auto reread = IntentJournal::Open(path_.string());
    EXPECT_TRUE(reread.ok()) << reread.status();
    return reread.ok() ? (*reread)->leftover() : std::nullopt;
  }

  std::filesystem::path path_;
  std::shared_ptr<std::promise<absl::Status>> faults_ = std::make_shared<std::promise<absl::Status>>();
};

TEST_F(TunerFaultTest, AMeasurementThatEndsClearsTheJournal) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("fine", 2, TimedKernel(1e-6)));
  Start(std::move(c));
  ASSERT_TRUE(tuner_->MeasureOnce(p_).ok());
  EXPECT_FALSE(Leftover().has_value());
}

TEST_F(TunerFaultTest, ACandidateWithNoProgressIsReportedHungWithTheJournalNamingIt) {
  options_.hang_seconds = 0.2;
  std::vector<CandidateSpec> c;
  c.push_back(Gated("hangs"));
  Start(std::move(c));
  auto caller = MeasureInBackground(p_);
  gate_->WaitEntered();

  std::future<absl::Status> fault = faults_->get_future();
  ASSERT_TRUE(Ready(fault)) << "the watchdog never fired";
  EXPECT_EQ(fault.get().code(), absl::StatusCode::kDeadlineExceeded);
  const std::optional<Intent> left = Leftover();
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->candidate, "hangs");
  EXPECT_EQ(left->phase, "oracle");
  EXPECT_EQ(left->problem, p_);
  EXPECT_NE(left->cause.find("hung"), std::string::npos) << left->cause;

  gate_->Open();  // (a daemon would have exited by now)
  EXPECT_EQ(caller.get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(Stored(p_));
  EXPECT_TRUE(Leftover().has_value());  // kept for the restart
}

TEST_F(TunerFaultTest, ADeviceFaultStopsTheMeasurementAndTheJournalNamesTheCandidate) {
  auto later_runs = std::make_shared<int>(0);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("faults", 3, [this](const GemmArgs&) {
    engine_.backend.SetHealth(absl::InternalError("sticky device error: illegal address"));
    return absl::InternalError("illegal address");
  }));
  c.push_back(FakeCandidate("after", 2, [later_runs](const GemmArgs& a) {
    ++*later_runs;
    NaiveGemm(a, a.problem.k, a.problem.m);
    return absl::OkStatus();
  }));
  Start(std::move(c));
  const absl::StatusOr<Verdict> v = tuner_->MeasureOnce(p_);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnavailable) << v.status();
  std::future<absl::Status> fault = faults_->get_future();
  ASSERT_TRUE(Ready(fault));
  EXPECT_NE(fault.get().message().find("illegal address"), std::string::npos);
  EXPECT_EQ(*later_runs, 0);  // nothing runs on a dead device
  EXPECT_FALSE(Stored(p_));
  const std::optional<Intent> left = Leftover();
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->candidate, "faults");
  EXPECT_NE(left->cause.find("device fault"), std::string::npos) << left->cause;
}

TEST_F(TunerFaultTest, ARefinementNamesItsShapeInTheJournalBeforeEachLaunch) {
  const Problem shape{DType::kF32, 32, 48, 56};  // p_'s bucket, another shape
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("vendor", 3, TimedKernel(100e-6)));
  c.push_back(FakeCandidate("faults_there", 1, [this, shape](const GemmArgs& a) {
    if (a.problem == shape) {
      engine_.backend.SetHealth(absl::InternalError("sticky device error: illegal address"));
      return absl::InternalError("illegal address");
    }
    NaiveGemm(a, a.problem.k, a.problem.m);
    static_cast<FakeStream*>(a.stream)->Advance(1e-6);
    return absl::OkStatus();
  }));
  Start(std::move(c));
  absl::StatusOr<Verdict> bucket = tuner_->MeasureOnce(p_);
  ASSERT_TRUE(bucket.ok()) << bucket.status();
  ASSERT_EQ(bucket->winner, "faults_there");

  const absl::StatusOr<Verdict> refined =
      tuner_->Refine(shape, {}, MeasureCall{.remeasure = true});
  EXPECT_EQ(refined.status().code(), absl::StatusCode::kUnavailable) << refined.status();
  std::future<absl::Status> fault = faults_->get_future();
  ASSERT_TRUE(Ready(fault));
  const std::optional<Intent> left = Leftover();
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->candidate, "faults_there");
  EXPECT_EQ(left->problem, shape);
  EXPECT_NE(left->cause.find("device fault"), std::string::npos) << left->cause;
}

}  // namespace
}  // namespace arbiter
