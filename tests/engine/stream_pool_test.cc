#include "engine/stream_pool.h"

#include <chrono>
#include <functional>
#include <future>
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
  ASSERT_TRUE(Eventually([&] { return pool->waiting() == 1; }));
  held.reset();
  EXPECT_TRUE(measurement.get());
}

}  // namespace
}  // namespace arbiter
