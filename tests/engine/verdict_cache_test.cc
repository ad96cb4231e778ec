#include "engine/verdict_cache.h"

#include "gtest/gtest.h"

namespace arbiter {
namespace {

BucketKey Key(int64_t m) { return BucketKeyOf(Problem{DType::kF32, m, 64, 64}); }

Verdict Won(const BucketKey& key, std::string winner) {
  Verdict v;
  v.dtype = key.dtype;
  v.bucket = key.bucket;
  v.winner = std::move(winner);
  return v;
}

TEST(VerdictCacheTest, ReturnsWhatWasPutForThatKeyOnly) {
  VerdictCache cache(4);
  cache.Put(Key(64), Won(Key(64), "tiled"));
  ASSERT_TRUE(cache.Get(Key(64)).has_value());
  EXPECT_EQ(cache.Get(Key(64))->winner, "tiled");
  EXPECT_FALSE(cache.Get(Key(8)).has_value());
  EXPECT_FALSE(cache.Get(BucketKeyOf(Problem{DType::kF16, 64, 64, 64})).has_value());
}

TEST(VerdictCacheTest, PutReplacesTheVerdictOfAKey) {
  VerdictCache cache(4);
  cache.Put(Key(64), Won(Key(64), "tiled"));
  cache.Put(Key(64), Won(Key(64), "splitk"));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.Get(Key(64))->winner, "splitk");
}

TEST(VerdictCacheTest, BoundedCacheEvictsTheLeastRecentlyUsed) {
  VerdictCache cache(2);
  cache.Put(Key(8), Won(Key(8), "a"));
  cache.Put(Key(64), Won(Key(64), "b"));
  ASSERT_TRUE(cache.Get(Key(8)).has_value());  // Key(8) is now the most recently used
  cache.Put(Key(512), Won(Key(512), "c"));      // past capacity: Key(64) goes
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_TRUE(cache.Get(Key(8)).has_value());
  EXPECT_FALSE(cache.Get(Key(64)).has_value());
  EXPECT_TRUE(cache.Get(Key(512)).has_value());
}

TEST(VerdictCacheTest, NeverHoldsMoreThanItsCapacity) {
  VerdictCache cache(3);
  for (int64_t m = 1; m <= 4096; m *= 2) cache.Put(Key(m), Won(Key(m), "x"));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_TRUE(cache.Get(Key(4096)).has_value());  // the newest stays
}

TEST(VerdictCacheTest, ZeroCapacityCachesNothing) {
  VerdictCache cache(0);
  cache.Put(Key(64), Won(Key(64), "tiled"));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.Get(Key(64)).has_value());
}

TEST(VerdictCacheTest, ClearEmptiesIt) {
  VerdictCache cache(4);
  cache.Put(Key(8), Won(Key(8), "a"));
  cache.Put(Key(64), Won(Key(64), "b"));
  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.Get(Key(8)).has_value());
}

TEST(VerdictCacheTest, UnconfirmedEntriesAreHeldButNotServedUntilPutAgain) {
  VerdictCache cache(4);
  cache.Put(Key(8), Won(Key(8), "a"));
  const uint64_t before = cache.generation();
  cache.MarkUnconfirmed();
  EXPECT_GT(cache.generation(), before);  // nothing remembered before it is served after
  EXPECT_FALSE(cache.Get(Key(8)).has_value());  // the store is read again
  ASSERT_TRUE(cache.Held(Key(8)).has_value());  // what to serve while it cannot be
  EXPECT_EQ(cache.Held(Key(8))->winner, "a");
  cache.Put(Key(8), Won(Key(8), "b"));  // the store's answer
  ASSERT_TRUE(cache.Get(Key(8)).has_value());
  EXPECT_EQ(cache.Get(Key(8))->winner, "b");
}

TEST(VerdictCacheTest, DropForgetsOneKeyOnly) {
  VerdictCache cache(4);
  cache.Put(Key(8), Won(Key(8), "a"));
  cache.Put(Key(64), Won(Key(64), "b"));
  cache.MarkUnconfirmed();
  cache.Drop(Key(8));  // the store has no verdict for it
  EXPECT_FALSE(cache.Held(Key(8)).has_value());
  EXPECT_TRUE(cache.Held(Key(64)).has_value());
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace arbiter
