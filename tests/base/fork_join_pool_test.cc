#include "base/fork_join_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace arbiter {
namespace {

// Every part of every job runs exactly once, and Run returns only after all of them:
// jobs of varying size back to back, each part counting into its own slot.
TEST(ForkJoinPoolTest, EachPartOfEachJobRunsOnceBeforeRunReturns) {
  ForkJoinPool pool(4);
  ASSERT_EQ(pool.threads(), 4);
  for (int job = 0; job < 500; ++job) {
    const int parts = 1 + job % 4;
    std::vector<std::atomic<int>> runs(4);
    pool.Run(parts, [&](int part) { runs[part].fetch_add(1); });
    for (int part = 0; part < 4; ++part) {
      ASSERT_EQ(runs[part].load(), part < parts ? 1 : 0) << "job " << job << " part " << part;
    }
  }
}

TEST(ForkJoinPoolTest, PartZeroRunsOnTheCallerAndOthersElsewhere) {
  ForkJoinPool pool(3);
  std::vector<std::thread::id> ran(3);
  pool.Run(3, [&](int part) { ran[part] = std::this_thread::get_id(); });
  EXPECT_EQ(ran[0], std::this_thread::get_id());
  EXPECT_NE(ran[1], std::this_thread::get_id());
  EXPECT_NE(ran[2], std::this_thread::get_id());
  EXPECT_NE(ran[1], ran[2]);
}

TEST(ForkJoinPoolTest, MorePartsThanThreadsAreClampedAndOneThreadRunsInline) {
  ForkJoinPool pool(2);
  std::atomic<int> calls{0};
  pool.Run(10, [&](int part) {
    EXPECT_LT(part, 2);
    calls.fetch_add(1);
  });
  EXPECT_EQ(calls.load(), 2);
  ForkJoinPool single(0);
  EXPECT_EQ(single.threads(), 1);
  std::thread::id ran;
  single.Run(4, [&](int part) { ran = std::this_thread::get_id(); });
  EXPECT_EQ(ran, std::this_thread::get_id());
}

}  // namespace
}  // namespace arbiter
