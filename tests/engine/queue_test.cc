// The bounded work queue and deadlines of Arbiter::Dispatch: a gated kernel
// holds the only device stream, so which dispatches wait, which are refused and
// which never start is decided by the test, with no sleeps as synchronization.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "engine/arbiter.h"
#include "engine/measurer.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_backend.h"

namespace arbiter {
namespace {

using std::chrono::system_clock;
using testing::FakeBackend;
using testing::FakeCandidate;
using testing::FakeStream;
using testing::NaiveGemm;
using testing::Gate;

// Polls for a state another thread reaches without signalling it (a dispatch
// blocked inside the engine's queue), for at most 30 s.
bool Eventually(const std::function<bool()>& condition) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // between checks, not a wait for one
  }
  return true;
}

bool Ready(const std::future<absl::StatusOr<DispatchResult>>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

class QueueTest : public ::testing::Test {
 protected:
  // One device stream and one candidate whose kernel waits at `gate_`; tuning
  // off, so a dispatch runs the kernel exactly once and nothing is measured.
  void Start(size_t max_queue) {
    ArbiterOptions options;
    options.workers = 1;
    options.max_queue = max_queue;
    options.tuning = TuningPolicy::kOff;
    auto backend = std::make_unique<FakeBackend>();
    std::vector<CandidateSpec> candidates;
    candidates.push_back(FakeCandidate("gated", 1, [gate = gate_](const GemmArgs& a) {
      gate->Pass();
      NaiveGemm(a, a.problem.k, a.problem.m);
      static_cast<FakeStream*>(a.stream)->Advance(1e-6);
      return absl::OkStatus();
    }));
    auto registry = Registry::Create(std::move(candidates), *backend);
    ASSERT_TRUE(registry.ok()) << registry.status();
    auto store = VerdictStore::Open(":memory:");
    ASSERT_TRUE(store.ok()) << store.status();
    auto arbiter = Arbiter::Create(options, std::move(backend), std::move(*registry), std::move(*store));
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

TEST_F(QueueTest, DispatchBeyondAZeroQueueIsRefusedWithResourceExhaustedNamingTheLimit) {
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

TEST_F(QueueTest, QueueHoldsUpToItsLimitThenRefusesAndTheQueuedWorkRuns) {
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

TEST_F(QueueTest, DispatchWhoseDeadlineHasPassedIsNotStarted) {
  Start(/*max_queue=*/4);
  SelectOptions options;
  options.deadline = system_clock::now() - std::chrono::seconds(1);
  const absl::StatusOr<DispatchResult> late = Dispatch(options);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_NE(late.status().message().find("ms ago"), std::string::npos) << late.status();
  EXPECT_EQ(gate_->Entered(), 0);
}

TEST_F(QueueTest, DispatchWithAFutureDeadlineRuns) {
  Start(/*max_queue=*/4);
  gate_->Open();
  SelectOptions options;
  options.deadline = system_clock::now() + std::chrono::hours(1);
  const absl::StatusOr<DispatchResult> r = Dispatch(options);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(gate_->Entered(), 1);
}

TEST_F(QueueTest, DeadlineThatPassesWhileQueuedStopsTheWorkFromStarting) {
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

}  // namespace
}  // namespace arbiter
