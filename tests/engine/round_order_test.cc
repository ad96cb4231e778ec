// RoundOrder: the order of a timing round's samples (engine/round_order.h).
#include "engine/round_order.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace arbiter {
namespace {

TEST(RoundOrderTest, EachRoundIsAPermutationAndEachEntrantGoesFirstOnceEveryNRounds) {
  for (size_t n = 1; n <= 16; ++n) {
    std::vector<int> firsts(n, 0);
    for (int round = 0; round < static_cast<int>(3 * n); ++round) {
      const std::vector<size_t> order = RoundOrder(n, round);
      ASSERT_EQ(order.size(), n);
      std::set<size_t> seen(order.begin(), order.end());
      ASSERT_EQ(seen.size(), n) << "n " << n << " round " << round;
      ASSERT_LT(*seen.rbegin(), n);
      ++firsts[order[0]];
    }
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(firsts[i], 3) << "n " << n << " entrant " << i;
  }
  EXPECT_TRUE(RoundOrder(0, 3).empty());
}

// Within the minimum five rounds, each of three or more entrants follows more than
// one other (the rotation it replaces kept each behind the same one every round).
TEST(RoundOrderTest, EachEntrantFollowsDifferentOthersWithinFiveRounds) {
  for (size_t n = 3; n <= 16; ++n) {
    std::vector<std::set<size_t>> before(n);
    for (int round = 0; round < 5; ++round) {
      const std::vector<size_t> order = RoundOrder(n, round);
      for (size_t j = 1; j < n; ++j) before[order[j]].insert(order[j - 1]);
    }
    for (size_t i = 0; i < n; ++i) {
      EXPECT_GE(before[i].size(), 2u) << "n " << n << ": entrant " << i << " always follows "
                                      << *before[i].begin();
    }
  }
}

}  // namespace
}  // namespace arbiter
