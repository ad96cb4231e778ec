// Dispatch: running a selection on the caller's operands, the sampled
// verification of live results, and - through Arbiter::Dispatch - the bounded
// work queue and deadlines: a gated kernel holds the only device stream, so
// which dispatches wait, which are refused and which never start is decided by
// the test, with no sleeps as synchronization.
#include "engine/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <future>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/arbiter.h"
#include "engine/measurer.h"
#include "engine/selection_policy.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_arbiter.h"
#include "tests/engine/fake_engine.h"

namespace arbiter {
namespace {

using std::chrono::system_clock;
using testing::Eventually;
using testing::FakeEngine;
using testing::FakeCandidate;
using testing::FakeStream;
using testing::NaiveGemm;
using testing::Gate;
using testing::TimedKernel;
using testing::HostCostlyKernel;
using testing::GatedKernel;
using testing::FakeArbiter;

bool Ready(const std::future<absl::StatusOr<DispatchResult>>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

class DispatchQueueTest : public ::testing::Test {
 protected:
  // One device stream and one candidate whose kernel waits at `gate_`; tuning
  // off, so a dispatch runs the kernel exactly once and nothing is measured.
  void Start(size_t max_queue) {
    ArbiterOptions options;
    options.workers = 1;
    options.max_queue = max_queue;
    options.tuning = TuningPolicy::kOff;
    std::vector<CandidateSpec> candidates;
    candidates.push_back(FakeCandidate("gated", 1, GatedKernel(gate_)));
    auto arbiter = FakeArbiter(options, std::move(candidates));
    ASSERT_TRUE(arbiter.ok()) << arbiter.status();
    arbiter_ = std::move(*arbiter);
    a_.resize(p_.m * p_.k);
    b_.resize(p_.k * p_.n);
    FillRandom(DType::kF32, a_.data(), a_.size(), 11);
    FillRandom(DType::kF32, b_.data(), b_.size(), 12);
  }

  absl::StatusOr<DispatchResult> Dispatch(SelectOptions options = {}) {
    return arbiter_->Dispatch(p_, options, a_.data(), a_.size() * sizeof(float), b_.data(),
                              b_.size() * sizeof(float));
  }
  std::future<absl::StatusOr<DispatchResult>> DispatchInBackground(SelectOptions options = {}) {
    return std::async(std::launch::async, [this, options] { return Dispatch(options); });
  }

  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::unique_ptr<Arbiter> arbiter_;
  const Problem p_{DType::kF32, 12, 20, 8};
  std::vector<float> a_, b_;
};

TEST_F(DispatchQueueTest, DispatchBeyondAZeroQueueIsRefusedWithResourceExhaustedNamingTheLimit) {
  Start(/*max_queue=*/0);
  auto holder = DispatchInBackground();
  gate_->WaitEntered();  // the only stream is taken

  const absl::StatusOr<DispatchResult> refused = Dispatch();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("limit 0"), std::string::npos) << refused.status();

  gate_->Open();
  EXPECT_TRUE(holder.get().ok());
  EXPECT_EQ(gate_->Entered(), 1);  // the refused dispatch never ran
}

TEST_F(DispatchQueueTest, QueueHoldsUpToItsLimitThenRefusesAndTheQueuedWorkRuns) {
  Start(/*max_queue=*/1);
  auto holder = DispatchInBackground();
  gate_->WaitEntered();
  auto queued = DispatchInBackground();
  ASSERT_TRUE(Eventually([&] { return arbiter_->queue_depth() == 1 || Ready(queued); }));
  ASSERT_EQ(arbiter_->queue_depth(), 1u) << "the second dispatch finished instead of queueing";

  const absl::StatusOr<DispatchResult> refused = Dispatch();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("limit 1"), std::string::npos) << refused.status();

  gate_->Open();
  EXPECT_TRUE(holder.get().ok());
  const absl::StatusOr<DispatchResult> second = queued.get();
  EXPECT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(gate_->Entered(), 2);
  EXPECT_EQ(arbiter_->queue_depth(), 0u);
}

TEST_F(DispatchQueueTest, DispatchWhoseDeadlineHasPassedIsNotStarted) {
  Start(/*max_queue=*/4);
  SelectOptions options;
  options.deadline = system_clock::now() - std::chrono::seconds(1);
  const absl::StatusOr<DispatchResult> late = Dispatch(options);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_NE(late.status().message().find("ms ago"), std::string::npos) << late.status();
  EXPECT_EQ(gate_->Entered(), 0);
}

TEST_F(DispatchQueueTest, DispatchWithAFutureDeadlineRuns) {
  Start(/*max_queue=*/4);
  gate_->Open();
  SelectOptions options;
  options.deadline = system_clock::now() + std::chrono::hours(1);
  const absl::StatusOr<DispatchResult> r = Dispatch(options);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(gate_->Entered(), 1);
}

TEST_F(DispatchQueueTest, DeadlineThatPassesWhileQueuedStopsTheWorkFromStarting) {
  Start(/*max_queue=*/4);
  auto holder = DispatchInBackground();
  gate_->WaitEntered();

  SelectOptions options;
  options.deadline = system_clock::now() + std::chrono::milliseconds(200);
  auto queued = DispatchInBackground(options);
  ASSERT_TRUE(Eventually([&] { return arbiter_->queue_depth() == 1 || Ready(queued); }));
  ASSERT_EQ(arbiter_->queue_depth(), 1u) << "the dispatch finished before queueing: "
                                         << queued.get().status();
  // Waiting on the clock itself: the deadline is what is being tested.
  ASSERT_TRUE(Eventually([&] { return system_clock::now() > *options.deadline; }));
  gate_->Open();

  EXPECT_TRUE(holder.get().ok());
  const absl::StatusOr<DispatchResult> late = queued.get();
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_NE(late.status().message().find("queued"), std::string::npos) << late.status();
  EXPECT_EQ(gate_->Entered(), 1);  // only the holder's kernel ran
}

TEST(DispatchChecksTest, OperandSizesMustHoldTheProblemsAAndB) {
  const Problem p{DType::kBF16, 3, 5, 7};
  EXPECT_TRUE(CheckOperandSizes(p, 3 * 7 * 2, 7 * 5 * 2).ok());
  const absl::Status a = CheckOperandSizes(p, 3 * 7 * 2 - 1, 7 * 5 * 2);
  EXPECT_EQ(a.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.message(), "a: expected 42 bytes (m*k = 3*7 elements of bf16), got 41");
  const absl::Status b = CheckOperandSizes(p, 3 * 7 * 2, 0);
  EXPECT_EQ(b.message(), "b: expected 70 bytes (k*n = 7*5 elements of bf16), got 0");
}

TEST(DispatchChecksTest, OnlyAPassedDeadlineStopsTheWork) {
  EXPECT_TRUE(CheckDeadline(std::nullopt, "on arrival").ok());
  EXPECT_TRUE(CheckDeadline(system_clock::now() + std::chrono::hours(1), "on arrival").ok());
  const absl::Status late = CheckDeadline(system_clock::now() - std::chrono::seconds(2), "on arrival");
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.message().find("ms ago on arrival; the work was not started"), std::string::npos)
      << late.message();
}

// A stream whose work runs only when the host waits for it (ElapsedSeconds,
// Synchronize, a copy), in the order it was enqueued, as a GPU's does: a
// dispatch that answered before waiting would leave C unwritten.
class DeferredStream final : public Stream {
 public:
  void Enqueue(std::string what, std::function<void()> work = [] {}) {
    pending_.push_back({std::move(what), std::move(work)});
  }
  // What ran, in order.
  const std::vector<std::string>& ran() const { return ran_; }

  absl::Status CopyToDevice(Buffer& dst, const void* src, size_t bytes) override {
    RunAll();
    std::memcpy(dst.data(), src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const Buffer& src, size_t bytes) override {
    RunAll();
    std::memcpy(dst, const_cast<Buffer&>(src).data(), bytes);
    return absl::OkStatus();
  }
  absl::Status Poison(Buffer& buf, DType dtype, size_t count) override {
    RunAll();
    FillNaN(dtype, buf.data(), count);
    return absl::OkStatus();
  }
  absl::Status FlushCache() override { return absl::OkStatus(); }
  // Each launch's key, as "candidate@version problem a b c" (addresses as given).
  absl::Status Launch(const LaunchKey& key, absl::FunctionRef<absl::Status()> launch) override {
    keys_.push_back(absl::StrCat(std::string(key.candidate), "@", key.version, " ",
                                 key.problem.ToString(), " ", absl::Hex(key.a), " ",
                                 absl::Hex(key.b), " ", absl::Hex(key.c)));
    return launch();
  }
  const std::vector<std::string>& keys() const { return keys_; }
  absl::Status TimerStart() override {
    Enqueue("timer start");
    return absl::OkStatus();
  }
  absl::Status TimerStop() override {
    Enqueue("timer stop");
    return absl::OkStatus();
  }
  absl::StatusOr<double> ElapsedSeconds() override {
    RunAll();  // the stop is the last thing enqueued: waiting for it runs everything
    return 5e-6;
  }
  absl::Status Synchronize() override {
    RunAll();
    return absl::OkStatus();
  }
  absl::Status Reference(const Problem& p, const Buffer& a, const Buffer& b,
                         std::vector<double>* c) override {
    RunAll();
    return FakeStream().Reference(p, a, b, c);
  }
  absl::Status WaitSharedEvent(std::string_view handle) override {
    Enqueue("wait " + std::string(handle));
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> keys_;
  void RunAll() {
    for (auto& [what, work] : pending_) {
      work();
      ran_.push_back(what);
    }
    pending_.clear();
  }
  std::vector<std::pair<std::string, std::function<void()>>> pending_;
  std::vector<std::string> ran_;
};

// A kernel that enqueues its work on a DeferredStream instead of doing it.
absl::Status DeferredGemm(const GemmArgs& args) {
  static_cast<DeferredStream*>(args.stream)->Enqueue("kernel", [args] {
    NaiveGemm(args, args.problem.k, args.problem.m);
  });
  return absl::OkStatus();
}

// A Dispatcher over a fake device with one stream, and a recorder of what it reports.
class DispatcherTest : public ::testing::Test, public ArbiterObserver {
 protected:
  // `stream`: the device's one stream, instead of a FakeStream.
  void Start(std::vector<CandidateSpec> candidates, double verify_fraction,
             std::unique_ptr<Stream> stream = nullptr) {
    ASSERT_TRUE(engine_.Start(std::move(candidates)).ok());
    if (stream != nullptr) {
      std::vector<std::unique_ptr<Stream>> streams;
      streams.push_back(std::move(stream));
      engine_.streams = std::make_unique<StreamPool>(std::move(streams), 4);
    }
    dispatcher_ = std::make_unique<Dispatcher>(engine_.backend, *engine_.streams,
                                               *engine_.quarantine, cache_, verify_fraction);
    dispatcher_->set_observer(this);
    a_.resize(p_.m * p_.k);
    b_.resize(p_.k * p_.n);
    FillRandom(DType::kF32, a_.data(), a_.size(), 21);
    FillRandom(DType::kF32, b_.data(), b_.size(), 22);
  }
  Selection Chosen(const std::string& name) {
    auto s = SelectTierDefault(p_, {engine_.registry->Find(name)}, Determinism::kNondeterministic,
                               VerdictSource::kTierDefault, "test");
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }
  absl::StatusOr<DispatchResult> Run(const Selection& s) {
    return dispatcher_->Run(p_, s, CallContext{}, a_.data(), b_.data());
  }

  void OnDispatch(const Problem&, const Selection&, double, const absl::Status& s) override {
    ++dispatched;
    if (!s.ok()) ++failed;
  }
  void OnVerification(const Problem&, const Selection&, double,
                      VerificationOutcome outcome) override {
    ++verified;
    ++outcomes[outcome];
  }
  // Fills the client's operands A and B with `a` and `b`.
  void Operands(float a, float b) {
    std::fill(a_.begin(), a_.end(), a);
    std::fill(b_.begin(), b_.end(), b);
  }
  bool Quarantined(const std::string& name) {
    return engine_.quarantine->Covers(engine_.Spec(name), p_.dtype, BucketOf(p_));
  }

  FakeEngine engine_;
  VerdictCache cache_{16};
  std::unique_ptr<Dispatcher> dispatcher_;
  const Problem p_{DType::kF32, 12, 20, 8};
  std::vector<float> a_, b_;
  int dispatched = 0, failed = 0, verified = 0;
  std::map<VerificationOutcome, int> outcomes;
};

TEST_F(DispatcherTest, RunsTheSelectedMemberAndReturnsCAndItsDeviceTime) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("timed", 2, TimedKernel(7e-6)));
  Start(std::move(c), 0.0);
  absl::StatusOr<DispatchResult> r = Run(Chosen("timed"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->device_seconds, 7e-6);  // the fake device's clock, not a host timing
  EXPECT_EQ(r->selection.candidate, "timed");
  ASSERT_EQ(r->c.size(), p_.c_bytes());
  const float* c_out = reinterpret_cast<const float*>(r->c.data());
  double ref = 0;
  for (int64_t k = 0; k < p_.k; ++k) ref += double(a_[k]) * b_[k * p_.n];
  EXPECT_NEAR(c_out[0], ref, 1e-5);
  EXPECT_EQ(dispatched, 1);
  EXPECT_EQ(verified, 0);
}

// An idle device would start the timer at once and wait out the host's launch
// inside the window (cuBLAS's takes 10-100 us on the H200): the device time a
// dispatch reports, to its client and to the metrics, is the kernel's alone.
TEST_F(DispatcherTest, TheDeviceTimeReportedLeavesOutTheHostsLaunch) {
  auto owned = std::make_unique<FakeStream>();
  FakeStream* stream = owned.get();
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("costly_launch", 2, HostCostlyKernel(50e-6, 7e-6)));
  Start(std::move(c), 0.0, std::move(owned));
  absl::StatusOr<DispatchResult> r = Run(Chosen("costly_launch"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->device_seconds, 7e-6);
  EXPECT_EQ(stream->holds(), 1);
  EXPECT_FALSE(stream->held()) << "the hold outlived the dispatch";
  EXPECT_FALSE(r->stages.replayed);
}

// A replayed recording (Stream::Replays) carries the timer's events next to the
// kernel: no host launch between them to keep out, so no hold is taken, and the
// device time is still the kernel's.
TEST_F(DispatcherTest, ADispatchTheStreamReplaysTakesNoHold) {
  auto owned = std::make_unique<FakeStream>();
  FakeStream* stream = owned.get();
  stream->set_replays(true);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("timed", 2, TimedKernel(7e-6)));
  Start(std::move(c), 0.0, std::move(owned));
  absl::StatusOr<DispatchResult> r = Run(Chosen("timed"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(stream->holds(), 0) << "a hold was launched for a replay";
  EXPECT_TRUE(r->stages.replayed) << "the metrics would count it as launched";
  EXPECT_DOUBLE_EQ(r->device_seconds, 7e-6);
}

TEST_F(DispatcherTest, AFailedLaunchReleasesItsHold) {
  auto owned = std::make_unique<FakeStream>();
  FakeStream* stream = owned.get();
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("declines", 2, [](const GemmArgs&) {
    return absl::UnimplementedError("no kernel for this shape");
  }));
  Start(std::move(c), 0.0, std::move(owned));
  EXPECT_EQ(Run(Chosen("declines")).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(stream->holds(), 1);
  EXPECT_FALSE(stream->held()) << "held work would never run";
}

// A launch that waits for the device outlasts the hold (which then expires and
// stalls that dispatch). Once may be a kernel's first launch loading its module;
// twice, and the candidate is timed without a hold from then on.
TEST_F(DispatcherTest, ACandidateWhoseLaunchOutlastsTwoHoldsIsNotHeldAgain) {
  auto owned = std::make_unique<FakeStream>();
  FakeStream* stream = owned.get();
  stream->set_holds_expire(true);
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("waits", 2, HostCostlyKernel(50e-6, 7e-6)));
  c.push_back(FakeCandidate("plain", 2, TimedKernel(7e-6)));
  Start(std::move(c), 0.0, std::move(owned));
  ASSERT_TRUE(Run(Chosen("waits")).ok());
  ASSERT_EQ(stream->holds(), 1);
  ASSERT_TRUE(Run(Chosen("waits")).ok());
  ASSERT_EQ(stream->holds(), 2) << "one expiry (a first launch loading its module) ended the holds";
  absl::StatusOr<DispatchResult> again = Run(Chosen("waits"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(stream->holds(), 2) << "held again after two of its holds expired";
  EXPECT_DOUBLE_EQ(again->device_seconds, 50e-6 + 7e-6);  // the host's launch, as it is
  ASSERT_TRUE(Run(Chosen("plain")).ok());
  EXPECT_EQ(stream->holds(), 3) << "another candidate lost its hold too";
}

TEST_F(DispatcherTest, AKernelErrorIsReportedWithTheCandidateAndProblem) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("declines", 2, [](const GemmArgs&) {
    return absl::UnimplementedError("no kernel for this shape");
  }));
  Start(std::move(c), 0.0);
  absl::StatusOr<DispatchResult> r = Run(Chosen("declines"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(r.status().message(), "declines failed on f32 12x20x8: no kernel for this shape");
  EXPECT_EQ(failed, 1);
}

TEST_F(DispatcherTest, VerificationSamplesEveryNthDispatchExactly) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("timed", 2, TimedKernel(1e-6)));
  Start(std::move(c), 0.25);
  const Selection s = Chosen("timed");
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(Run(s).ok());
  EXPECT_EQ(verified, 2);
  EXPECT_EQ(outcomes[VerificationOutcome::kPass], 2);
}

TEST_F(DispatcherTest, AnOutOfBudgetLiveResultQuarantinesTheCandidateForItsBucketOnly) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("skips_k", 2, [](const GemmArgs& a) {
    NaiveGemm(a, a.problem.k - 1, a.problem.m);
    return absl::OkStatus();
  }));
  Start(std::move(c), 1.0);
  cache_.Put(BucketKeyOf(p_), Verdict{});
  const Selection s = Chosen("skips_k");
  absl::StatusOr<DispatchResult> r = Run(s);
  ASSERT_TRUE(r.ok()) << r.status();  // the client still gets the answer it asked for
  EXPECT_EQ(outcomes[VerificationOutcome::kFail], 1);
  const CandidateSpec& spec = engine_.Spec("skips_k");
  EXPECT_TRUE(engine_.quarantine->Covers(spec, p_.dtype, BucketOf(p_)));
  EXPECT_FALSE(engine_.quarantine->Covers(spec, p_.dtype, BucketOf(Problem{DType::kF32, 64, 64, 64})));
  EXPECT_EQ(cache_.size(), 0u);  // nothing cached is served from before the quarantine
  auto entries = engine_.quarantine->List();
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_NE((*entries)[0].reason.find("on the daemon's own"), std::string::npos)
      << (*entries)[0].reason;
}

// A client's NaN operands make the reference NaN: a correct kernel's NaN output
// there is no evidence against it.
TEST_F(DispatcherTest, NaNOperandsAreNotJudgedAndQuarantineNothing) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("correct", 2, TimedKernel(1e-6)));
  Start(std::move(c), 1.0);
  Operands(std::nanf(""), 1.0f);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(Run(Chosen("correct")).ok());
  EXPECT_EQ(outcomes[VerificationOutcome::kUnjudgeable], 6);
  EXPECT_FALSE(Quarantined("correct"));
}

// Finite operands whose exact product does not fit f32: the reference overflows
// C's dtype, so Inf from the kernel is right, not a fault.
TEST_F(DispatcherTest, OperandsWhoseProductOverflowsTheDTypeAreNotJudged) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("correct", 2, TimedKernel(1e-6)));
  Start(std::move(c), 1.0);
  Operands(1e30f, 1e30f);
  ASSERT_TRUE(Run(Chosen("correct")).ok());
  EXPECT_EQ(outcomes[VerificationOutcome::kUnjudgeable], 1);
  EXPECT_FALSE(Quarantined("correct"));
}

// Finite operands with a finite product whose f32 partial sums overflow: the
// kernel's Inf misses the exact reference, yet the kernel is correct - as the
// check on the daemon's own operands shows - so nothing is quarantined.
TEST_F(DispatcherTest, AFailureOnlyOnTheClientsOperandsIsNotConfirmedAndQuarantinesNothing) {
  std::vector<CandidateSpec> c;
  c.push_back(FakeCandidate("correct", 2, TimedKernel(1e-6)));
  Start(std::move(c), 1.0);
  // Each row of A: +3e38 over the first half of K, -3e38 over the second; B all ones.
  for (int64_t i = 0; i < p_.m; ++i)
    for (int64_t kk = 0; kk < p_.k; ++kk) a_[i * p_.k + kk] = kk < p_.k / 2 ? 3e38f : -3e38f;
  std::fill(b_.begin(), b_.end(), 1.0f);
  ASSERT_TRUE(Run(Chosen("correct")).ok());
  EXPECT_EQ(outcomes[VerificationOutcome::kUnconfirmed], 1);
  EXPECT_FALSE(Quarantined("correct"));
}

}  // namespace
}  // namespace arbiter

namespace arbiter {
namespace {

// C in place on the device (a region): the answer comes only once C is complete,
// and the client's event is waited on before the kernel reads A and B.
class ZeroCopyDispatchTest : public DispatcherTest {
 protected:
  void SetUp() override {
    auto stream = std::make_unique<DeferredStream>();
    stream_ = stream.get();
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("deferred", 2, DeferredGemm));
    Start(std::move(c), 0.0, std::move(stream));
    c_.assign(static_cast<size_t>(p_.m * p_.n), std::nanf(""));  // poisoned
  }
  DispatchIo InPlace() {
    DispatchIo io;
    io.a = Operand{.device = a_.data(), .bytes = p_.a_bytes()};
    io.b = Operand{.device = b_.data(), .bytes = p_.b_bytes()};
    io.c_device = c_.data();
    return io;
  }

  DeferredStream* stream_ = nullptr;
  std::vector<float> c_;
};

TEST_F(ZeroCopyDispatchTest, CInPlaceIsCompleteWhenTheDispatchAnswers) {
  absl::StatusOr<DispatchResult> r = dispatcher_->Run(p_, Chosen("deferred"), CallContext{}, InPlace());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->c.empty()) << "C stayed on the device";
  for (int64_t i = 0; i < p_.m; ++i) {
    for (int64_t j = 0; j < p_.n; ++j) {
      double ref = 0;
      for (int64_t k = 0; k < p_.k; ++k) ref += double(a_[i * p_.k + k]) * b_[k * p_.n + j];
      ASSERT_NEAR(c_[i * p_.n + j], ref, 1e-4) << "C[" << i << "," << j << "] at the answer";
    }
  }
  EXPECT_EQ(r->stages.h2d_seconds, 0) << "nothing was copied in";
  EXPECT_EQ(r->stages.d2h_seconds, 0) << "nothing was copied out";
}

// The stream may replay a recording of a launch (Stream::Launch): the key it is
// given names the candidate, its version, the problem and the operands' addresses,
// so a dispatch on other operands can never be served by another's recording.
TEST_F(ZeroCopyDispatchTest, EachLaunchIsKeyedByCandidateProblemAndOperandAddresses) {
  ASSERT_TRUE(dispatcher_->Run(p_, Chosen("deferred"), CallContext{}, InPlace()).ok());
  ASSERT_TRUE(dispatcher_->Run(p_, Chosen("deferred"), CallContext{}, InPlace()).ok());
  std::vector<float> other_c(c_.size());
  DispatchIo elsewhere = InPlace();
  elsewhere.c_device = other_c.data();
  ASSERT_TRUE(dispatcher_->Run(p_, Chosen("deferred"), CallContext{}, elsewhere).ok());
  const std::vector<std::string>& keys = stream_->keys();
  ASSERT_EQ(keys.size(), 3u) << "every kernel goes through Stream::Launch";
  EXPECT_EQ(keys[0], keys[1]) << "the same dispatch again has the same key";
  EXPECT_NE(keys[0], keys[2]) << "another C has another key";
  EXPECT_EQ(keys[0], absl::StrCat("deferred@", Chosen("deferred").version, " ", p_.ToString(), " ",
                                  absl::Hex(a_.data()), " ",
                                  absl::Hex(b_.data()), " ", absl::Hex(c_.data())));
}

TEST_F(ZeroCopyDispatchTest, TheClientsEventIsWaitedOnBeforeTheKernelReadsAAndB) {
  DispatchIo io = InPlace();
  io.wait_event = "client-event";
  absl::StatusOr<DispatchResult> r = dispatcher_->Run(p_, Chosen("deferred"), CallContext{}, io);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(stream_->ran(),
            (std::vector<std::string>{"wait client-event", "timer start", "kernel", "timer stop"}));
}

}  // namespace
}  // namespace arbiter
