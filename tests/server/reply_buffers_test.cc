// Reply buffers: a buffer comes back to the pool when its slice is released
// and is reused by the next reply it fits; the pool keeps no more than its cap
// idle, and never lends a small reply a buffer more than twice its size.
#include "server/reply_buffers.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

TEST(ReplyBuffersTest, AReleasedBufferIsReusedByTheNextReplyItFits) {
  ReplyBuffers pool(1 << 20);
  const uint8_t* first = nullptr;
  {
    grpc::Slice c = pool.Take(1000);
    ASSERT_EQ(c.size(), 1000u);
    first = c.begin();
    EXPECT_EQ(pool.idle_buffers(), 0);
  }
  EXPECT_EQ(pool.idle_buffers(), 1);
  EXPECT_EQ(pool.idle_bytes(), 1000);
  grpc::Slice again = pool.Take(900);  // fits, and is not more than twice as large
  EXPECT_EQ(again.size(), 900u);
  EXPECT_EQ(again.begin(), first);
  EXPECT_EQ(pool.idle_buffers(), 0);
}

TEST(ReplyBuffersTest, ASmallReplyDoesNotHoldALargeBuffer) {
  ReplyBuffers pool(1 << 20);
  { grpc::Slice large = pool.Take(10000); }
  grpc::Slice small = pool.Take(100);
  EXPECT_EQ(small.size(), 100u);
  EXPECT_EQ(pool.idle_buffers(), 1);  // the large one still idle
  EXPECT_EQ(pool.idle_bytes(), 10000);
}

TEST(ReplyBuffersTest, BuffersPastTheIdleCapAreFreed) {
  ReplyBuffers pool(3000);
  {
    grpc::Slice a = pool.Take(2000);
    grpc::Slice b = pool.Take(2000);
  }
  EXPECT_EQ(pool.idle_buffers(), 1);
  EXPECT_EQ(pool.idle_bytes(), 2000);
}

TEST(ReplyBuffersTest, ASliceMayOutliveThePool) {
  grpc::Slice kept;
  {
    ReplyBuffers pool(1 << 20);
    kept = pool.Take(4096);
  }
  std::fill_n(const_cast<uint8_t*>(kept.begin()), kept.size(), 7);  // still the slice's to use
  EXPECT_EQ(kept.begin()[4095], 7);
}

// The backend's allocator (page-locked memory on a GPU) is where every buffer
// comes from and goes back to - past the idle cap, and when the pool is gone.
TEST(ReplyBuffersTest, BuffersComeFromAndGoBackToTheGivenAllocator) {
  struct Ledger {
    std::set<void*> live;
    int allocated = 0;
  };
  auto ledger = std::make_shared<Ledger>();
  HostAllocator allocator;
  allocator.allocate = [ledger](size_t bytes) {
    void* data = std::malloc(bytes);
    ledger->live.insert(data);
    ++ledger->allocated;
    return data;
  };
  allocator.free = [ledger](void* data) {
    EXPECT_EQ(ledger->live.erase(data), 1u) << "freed a buffer the allocator did not hand out";
    std::free(data);
  };
  {
    ReplyBuffers pool(3000, allocator);
    {
      grpc::Slice a = pool.Take(2000);
      grpc::Slice b = pool.Take(2000);
      EXPECT_EQ(ledger->live.count(const_cast<uint8_t*>(a.begin())), 1u);
      EXPECT_EQ(ledger->live.count(const_cast<uint8_t*>(b.begin())), 1u);
    }
    EXPECT_EQ(ledger->live.size(), 1u);  // one kept idle, one past the cap given back
    grpc::Slice c = pool.Take(2000);     // the idle one, not a new one
    EXPECT_EQ(ledger->allocated, 2);
  }
  EXPECT_TRUE(ledger->live.empty()) << ledger->live.size() << " buffers never given back";
}

}  // namespace
}  // namespace arbiter::server
