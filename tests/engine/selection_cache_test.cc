// The SelectionCache answers only under the generation an answer was decided
// in, only until it expires, and never holds more than its capacity.
#include "engine/selection_cache.h"

#include <chrono>
#include <memory>

#include <gtest/gtest.h>

namespace arbiter {
namespace {

using std::chrono::hours;

std::shared_ptr<const Selection> Chosen(const std::string& candidate) {
  auto s = std::make_shared<Selection>();
  s->candidate = candidate;
  return s;
}

const SelectionCache::Key kKey{Problem{DType::kBF16, 16, 152064, 4096}, Determinism::kNondeterministic};

TEST(SelectionCacheTest, AnswersTheSameSelectionUnderItsGeneration) {
  SelectionCache cache(8, hours(1));
  auto chosen = Chosen("wgmma");
  cache.Put(kKey, 7, chosen);
  EXPECT_EQ(cache.Get(kKey, 7), chosen);
}

TEST(SelectionCacheTest, AnAnswerFromAnOlderGenerationIsNeverServed) {
  SelectionCache cache(8, hours(1));
  cache.Put(kKey, 7, Chosen("wgmma"));
  EXPECT_EQ(cache.Get(kKey, 8), nullptr);
}

TEST(SelectionCacheTest, OtherProblemsAndDeterminismsAreOtherKeys) {
  SelectionCache cache(8, hours(1));
  cache.Put(kKey, 1, Chosen("wgmma"));
  SelectionCache::Key other_n = kKey;
  other_n.problem.n = 152063;
  SelectionCache::Key strict = kKey;
  strict.required = Determinism::kRunToRun;
  EXPECT_EQ(cache.Get(other_n, 1), nullptr);
  EXPECT_EQ(cache.Get(strict, 1), nullptr);
}

TEST(SelectionCacheTest, AnExpiredAnswerIsNotServed) {
  SelectionCache cache(8, std::chrono::steady_clock::duration::zero());
  cache.Put(kKey, 1, Chosen("wgmma"));
  EXPECT_EQ(cache.Get(kKey, 1), nullptr);
}

TEST(SelectionCacheTest, StaysWithinItsCapacity) {
  SelectionCache cache(4, hours(1));
  for (int64_t m = 1; m <= 100; ++m) {
    cache.Put({Problem{DType::kF32, m, 8, 8}, Determinism::kNondeterministic}, 1, Chosen("x"));
    EXPECT_LE(cache.size(), 4u);
  }
  SelectionCache none(0, hours(1));
  none.Put(kKey, 1, Chosen("x"));
  EXPECT_EQ(none.Get(kKey, 1), nullptr);
}

}  // namespace
}  // namespace arbiter
