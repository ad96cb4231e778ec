#include "engine/stream_pool.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include "gtest/gtest.h"
#include "tests/engine/fake_engine.h"

namespace arbiter {
namespace {

using testing::Eventually;
using testing::FakeStreamPool;

// A lease on a free stream, kept until reset; nullopt when none was free.
std::optional<StreamPool::Lease> Hold(StreamPool& pool) {
  absl::StatusOr<StreamPool::Lease> lease = pool.Acquire(/*bounded=*/true);
  if (!lease.ok()) return std::nullopt;
  return std::optional<StreamPool::Lease>(*std::move(lease));
}

// What a bounded Acquire answers while every stream is held. A pool that queues
// the caller instead gives no answer; then `release` frees a stream so the
// caller, and the test, can finish.
absl::Status AnswerWhileFull(StreamPool& pool, const std::function<void()>& release) {
  auto answer = std::async(std::launch::async, [&] { return pool.Acquire(/*bounded=*/true).status(); });
  if (answer.wait_for(std::chrono::seconds(30)) == std::future_status::ready) return answer.get();
  release();
  answer.wait();
  return absl::InternalError("the caller was queued past the limit");
}

TEST(StreamPoolTest, LeasesAreDistinctStreamsWhileHeld) {
  auto pool = FakeStreamPool(2, 0);
  absl::StatusOr<StreamPool::Lease> a = pool->Acquire(/*bounded=*/true);
  absl::StatusOr<StreamPool::Lease> b = pool->Acquire(/*bounded=*/true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
}

TEST(StreamPoolTest, BoundedAcquireIsRefusedPastMaxWaitersNamingTheLimit) {
  auto pool = FakeStreamPool(1, 0);
  std::optional<StreamPool::Lease> held = Hold(*pool);
  ASSERT_TRUE(held.has_value());
  const absl::Status status = AnswerWhileFull(*pool, [&] { held.reset(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("limit 0"), std::string::npos) << status;
  EXPECT_EQ(pool->waiting(), 0u);
}

TEST(StreamPoolTest, AReturnedStreamGoesToTheWaiterAndTheQueueRefusesOnlyWhileFull) {
  auto pool = FakeStreamPool(1, 1);
  std::optional<StreamPool::Lease> held = Hold(*pool);
  ASSERT_TRUE(held.has_value());
  Stream* const stream = held->get();
  auto waiter = std::async(std::launch::async, [&] {
    absl::StatusOr<StreamPool::Lease> lease = pool->Acquire(/*bounded=*/true);
    return lease.ok() ? lease->get() : nullptr;
  });
  ASSERT_TRUE(Eventually([&] { return pool->waiting() == 1; }));
  const absl::Status full = AnswerWhileFull(*pool, [&] { held.reset(); });
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;

  held.reset();  // returns the stream: the waiter gets that very stream
  EXPECT_EQ(waiter.get(), stream);
  EXPECT_EQ(pool->waiting(), 0u);
  EXPECT_TRUE(pool->Acquire(/*bounded=*/true).ok());  // the waiter's lease went back too
}

TEST(StreamPoolTest, UnboundedAcquireWaitsEvenWhenTheQueueIsFull) {
  auto pool = FakeStreamPool(1, 0);
  std::optional<StreamPool::Lease> held = Hold(*pool);
  ASSERT_TRUE(held.has_value());
  auto measurement = std::async(std::launch::async, [&] {
    return pool->Acquire(/*bounded=*/false).ok();
  });
  ASSERT_TRUE(Eventually([&] { return pool->measurements_waiting() == 1; }));
  held.reset();
  EXPECT_TRUE(measurement.get());
}

// The stream a background Acquire got (nullptr when refused), and its status.
struct Got {
  Stream* stream = nullptr;
  absl::Status status;
  std::optional<StreamPool::Lease> lease;  // held until the test lets it go
};

std::future<Got> AcquireInBackground(StreamPool& pool, bool bounded, CallContext caller = {},
                                     std::shared_future<void> hold_until = {}) {
  return std::async(std::launch::async, [&pool, bounded, caller, hold_until] {
    Got got;
    absl::StatusOr<StreamPool::Lease> lease = pool.Acquire(bounded, caller);
    got.status = lease.status();
    if (lease.ok()) {
      got.stream = lease->get();
      if (hold_until.valid()) hold_until.wait();
    }
    return got;
  });
}

TEST(StreamPoolTest, AQueuedDispatchWhoseClientGoesAwayLeavesTheQueueAtOnce) {
  auto pool = FakeStreamPool(1, 4);
  std::optional<StreamPool::Lease> held = Hold(*pool);
  ASSERT_TRUE(held.has_value());
  auto gone = std::make_shared<std::atomic<bool>>(false);
  CallContext caller;
  caller.cancelled = [gone] { return gone->load(); };
  auto waiter = AcquireInBackground(*pool, /*bounded=*/true, caller);
  ASSERT_TRUE(Eventually([&] { return pool->waiting() == 1; }));

  gone->store(true);  // no stream is returned: the waiter leaves on its own
  const Got got = waiter.get();
  EXPECT_EQ(got.status.code(), absl::StatusCode::kCancelled) << got.status;
  EXPECT_EQ(pool->waiting(), 0u);
}

TEST(StreamPoolTest, AQueuedDispatchLeavesWhenItsDeadlinePassesWithoutAStreamFreeing) {
  auto pool = FakeStreamPool(1, 4);
  std::optional<StreamPool::Lease> held = Hold(*pool);
  ASSERT_TRUE(held.has_value());
  CallContext caller;
  caller.deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(50);
  const Got got = AcquireInBackground(*pool, /*bounded=*/true, caller).get();
  EXPECT_EQ(got.status.code(), absl::StatusCode::kDeadlineExceeded) << got.status;
  EXPECT_EQ(pool->waiting(), 0u);
}

TEST(StreamPoolTest, AWaitingDispatchIsServedBeforeAWaitingMeasurement) {
  auto pool = FakeStreamPool(1, 4);
  std::optional<StreamPool::Lease> held = Hold(*pool);
  ASSERT_TRUE(held.has_value());
  auto measurement = AcquireInBackground(*pool, /*bounded=*/false);
  ASSERT_TRUE(Eventually([&] { return pool->measurements_waiting() == 1; }));
  std::promise<void> release_dispatch;
  auto dispatch = AcquireInBackground(*pool, /*bounded=*/true, {}, release_dispatch.get_future().share());
  ASSERT_TRUE(Eventually([&] { return pool->waiting() == 1; }));

  held.reset();
  ASSERT_TRUE(Eventually([&] { return pool->waiting() == 0; }));  // the dispatch holds it now
  EXPECT_EQ(pool->measurements_waiting(), 1u);  // and the measurement still waits
  release_dispatch.set_value();
  EXPECT_TRUE(dispatch.get().status.ok());
  EXPECT_TRUE(measurement.get().status.ok());
}

TEST(StreamPoolTest, AYieldLendsTheStreamToQueuedDispatchesAndTakesTheSameStreamBack) {
  auto pool = FakeStreamPool(1, 4);
  absl::StatusOr<StreamPool::Lease> measuring = pool->Acquire(/*bounded=*/false);
  ASSERT_TRUE(measuring.ok());
  Stream* const mine = measuring->get();
  ASSERT_TRUE(pool->Yield(*measuring, {}).ok());  // nobody waits: keeps it
  EXPECT_EQ(measuring->get(), mine);

  auto dispatch = AcquireInBackground(*pool, /*bounded=*/true);
  ASSERT_TRUE(Eventually([&] { return pool->waiting() == 1; }));
  ASSERT_TRUE(pool->Yield(*measuring, {}).ok());
  EXPECT_EQ(dispatch.get().stream, mine);  // the dispatch ran on the lent stream
  EXPECT_EQ(measuring->get(), mine);       // and the measurement has it back
}

TEST(StreamPoolTest, AYieldWhoseCallerGoesAwayLeavesTheStreamWithThePool) {
  auto pool = FakeStreamPool(1, 4);
  absl::StatusOr<StreamPool::Lease> measuring = pool->Acquire(/*bounded=*/false);
  ASSERT_TRUE(measuring.ok());
  std::promise<void> release_dispatch;
  auto dispatch = AcquireInBackground(*pool, /*bounded=*/true, {}, release_dispatch.get_future().share());
  ASSERT_TRUE(Eventually([&] { return pool->waiting() == 1; }));
  auto gone = std::make_shared<std::atomic<bool>>(false);
  CallContext caller;
  caller.cancelled = [gone] { return gone->load(); };
  auto yielded = std::async(std::launch::async, [&] { return pool->Yield(*measuring, caller); });
  ASSERT_TRUE(Eventually([&] { return pool->measurements_waiting() == 1; }));

  gone->store(true);
  EXPECT_EQ(yielded.get().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(measuring->get(), nullptr);
  release_dispatch.set_value();
  EXPECT_TRUE(dispatch.get().status.ok());
  EXPECT_TRUE(pool->Acquire(/*bounded=*/true).ok());  // the stream went back to the pool
}

}  // namespace
}  // namespace arbiter
