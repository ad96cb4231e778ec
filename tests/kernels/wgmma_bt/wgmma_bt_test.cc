// Tests of wgmma_bt (label gpu), through its launcher and its candidate: every token tile (32,
// 64, 128, 256 and two tiles of 256) at ragged M, M != N both ways, K not a
// multiple of the 64-deep k-block, partial column strips, every split count
// (1 to 8 CTAs in a cluster), K = 65536, against an f64 reference on
// NaN-poisoned C with a guard; bitwise repeats (the run-to-run claim). Skipped
// without an sm_90 GPU. The plan, refusal and contract tests need no device.

#include <cstdint>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "engine/backend.h"
#include "engine/candidate.h"
#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/problem.h"
#include "kernels/wgmma_bt/wgmma_bt.h"
#include "kernels/wgmma_bt/wgmma_bt_candidate.h"
#include "tests/kernels/common/device_gemm.h"

namespace arbiter::kernels {
namespace {

using testing::DeviceGemm;

constexpr AccuracyBudget kBudget = {kWgmmaBtBudgetAbs, kWgmmaBtBudgetRel};

struct Shape {
  int64_t m, n, k;
};

int KBlocks(int64_t k) { return static_cast<int>((k + 63) / 64); }

// The token tile is the smallest that holds M (256-row tiles past 256), the
// strips cover N, and every rank of a split gets k-blocks.
TEST(WgmmaBtPlanTest, TokenTileFollowsMAndEveryRankHasWork) {
  struct Case {
    int64_t m;
    int tokens, token_tiles;
  };
  for (const Case& c : {Case{1, 32, 1}, Case{17, 32, 1}, Case{32, 32, 1}, Case{33, 64, 1},
                        Case{100, 128, 1}, Case{129, 256, 1}, Case{255, 256, 1},
                        Case{300, 256, 2}}) {
    for (const Shape& s : {Shape{c.m, 4096, 4096}, Shape{c.m, 200, 4104}, Shape{c.m, 18176, 72}}) {
      for (int sms : {1, 8, 132, 1 << 20}) {
        const WgmmaBtPlan plan = MakeWgmmaBtPlan(s.m, s.n, s.k, sms);
        EXPECT_EQ(plan.tokens, c.tokens) << "M=" << s.m;
        EXPECT_EQ(plan.token_tiles, c.token_tiles) << "M=" << s.m;
        EXPECT_EQ(plan.strips, (s.n + 64 * plan.consumers - 1) / (64 * plan.consumers));
        ASSERT_GE(plan.splits, 1);
        EXPECT_LE(plan.splits, 8);
        EXPECT_GE(int64_t{plan.splits} * plan.kb_per_split, KBlocks(s.k));
        EXPECT_LT(int64_t{plan.splits - 1} * plan.kb_per_split, KBlocks(s.k))
            << "the last rank would get no k-block at " << s.m << "x" << s.n << "x" << s.k;
      }
    }
  }
}

// Strips alone fill the SMs at 14336 columns; 4096 columns leave them idle,
// so K is split; a forced split count is honoured up to the k-blocks.
TEST(WgmmaBtPlanTest, SplitsKOnlyWhereStripsLeaveSmsIdle) {
  EXPECT_EQ(MakeWgmmaBtPlan(32, 14336, 4096, 132).splits, 1);
  EXPECT_GT(MakeWgmmaBtPlan(32, 4096, 4096, 132).splits, 1);
  EXPECT_EQ(MakeWgmmaBtPlan(32, 4096, 4096, 1).splits, 1);
  EXPECT_EQ(MakeWgmmaBtPlan(32, 4096, 4096, 132, 3).splits, 3);
  EXPECT_EQ(MakeWgmmaBtPlan(32, 4096, 64, 132, 8).splits, 1);  // one k-block
  EXPECT_EQ(MakeWgmmaBtPlan(32, 4096, 4096, 132, 99).splits, 8);
}

TEST(WgmmaBtPlanTest, RefusesWhatTmaCannotAddress) {
  alignas(16) static uint16_t buffer[64];
  LaunchArgs args;
  args.dtype = DType::kBF16;
  args.a = buffer;
  args.b = buffer;
  args.c = buffer;
  args.m = 17;
  args.n = 64;
  args.k = 64;
  EXPECT_EQ(WgmmaBtUnsupportedReason(args), nullptr);
  LaunchArgs bad = args;
  bad.k = 60;
  EXPECT_NE(WgmmaBtUnsupportedReason(bad), nullptr);
  bad = args;
  bad.n = 30;
  EXPECT_NE(WgmmaBtUnsupportedReason(bad), nullptr);
  bad = args;
  bad.b = buffer + 1;
  EXPECT_NE(WgmmaBtUnsupportedReason(bad), nullptr);
  bad = args;
  bad.dtype = DType::kF32;
  EXPECT_NE(WgmmaBtUnsupportedReason(bad), nullptr);
  bad = args;
  bad.m = 0;
  EXPECT_NE(WgmmaBtUnsupportedReason(bad), nullptr);
  EXPECT_EQ(LaunchWgmmaBt(bad, nullptr), cudaErrorInvalidValue);
}

// The contract the candidate declares, and operands TMA cannot address
// declined (UNIMPLEMENTED, naming why) before any launch or stream use.
TEST(WgmmaBtCandidateTest, DeclaresItsContractAndDeclinesMisalignedOperands) {
  const CandidateSpec spec = MakeWgmmaBtCandidate();
  ASSERT_EQ(spec.members.size(), 2u);
  for (const CandidateMember& member : spec.members) {
    EXPECT_EQ(member.contract.arch, "sm_90a");
    EXPECT_EQ(member.contract.determinism, Determinism::kRunToRun);
    EXPECT_EQ(member.contract.shape.min_m, kWgmmaBtRacedMinM);
    EXPECT_EQ(member.contract.shape.max_m, kWgmmaBtRacedMaxM);
    EXPECT_EQ(member.contract.shape.align_n, 8);
    EXPECT_EQ(member.contract.shape.align_k, 8);
  }
  alignas(16) static uint16_t buffer[64];
  GemmArgs g;
  g.problem = Problem{DType::kBF16, 17, 64, 64};
  g.a = buffer;
  g.b = buffer + 1;  // 2 bytes past a 16-byte boundary
  g.c = buffer;
  const absl::Status status = spec.Member(DType::kBF16)->run(g);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_NE(status.message().find("16-byte aligned"), std::string_view::npos) << status;
}

class WgmmaBtTest : public testing::Sm90StreamTest {
 protected:
  // Poisons C, launches with `force_splits` (0: planned) and waits.
  ::testing::AssertionResult Run(DeviceGemm& g, int force_splits = 0) {
    g.PoisonC();
    LaunchArgs args = g.Args(sm_count_);
    const cudaError_t err = LaunchWgmmaBt(args, stream_, force_splits);
    if (err != cudaSuccess) {
      return ::testing::AssertionFailure()
             << "LaunchWgmmaBt on " << g.problem() << ": " << cudaGetErrorName(err);
    }
    CUDA_OK(cudaStreamSynchronize(stream_));
    return ::testing::AssertionSuccess();
  }

};

// Every token tile at ragged M (17, 33, 100, 255; 1 and 300 too), M != N, K
// not a multiple of 64 (a zero-filled tail k-block), N not a multiple of the
// 64- or 128-column strip, both dtypes: every element of C written and within
// budget, the guard untouched.
TEST_F(WgmmaBtTest, MatchesReferenceAtRaggedM) {
  const Shape shapes[] = {{17, 4096, 1000}, {33, 200, 4104}, {100, 1032, 520}, {255, 328, 2056},
                          {1, 72, 136},     {300, 264, 200}, {24, 18176, 72},  {192, 4104, 8}};
  uint64_t seed = 1;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(g.Matches(kBudget));
    }
  }
}

// The launch geometry: M > N and M < N, a single strip and a single token
// row, at every split count a cluster can take (1 to 8), each token tile: a
// swapped axis, a wrong strip or rank offset leaves NaN or a wrong sum.
TEST_F(WgmmaBtTest, LaunchGeometryAtEverySplitCount) {
  const Shape shapes[] = {{40, 8, 1000}, {17, 392, 4104}, {100, 64, 600}, {255, 136, 1032}};
  uint64_t seed = 100;
  for (const Shape& s : shapes) {
    DeviceGemm g(Problem{DType::kBF16, s.m, s.n, s.k}, seed++);
    for (int splits = 1; splits <= 8; ++splits) {
      ASSERT_TRUE(Run(g, splits));
      EXPECT_TRUE(g.Matches(kBudget)) << splits << " splits";
    }
  }
}

// The accuracy claim at the longest K the contract names.
TEST_F(WgmmaBtTest, WithinBudgetAtK65536) {
  uint64_t seed = 200;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    DeviceGemm g(Problem{dtype, 17, 128, 65536}, seed++);
    ASSERT_TRUE(Run(g));
    EXPECT_TRUE(g.Matches(kBudget));
  }
}

// run_to_run: the same launch twice gives the same bytes, split or not.
TEST_F(WgmmaBtTest, RepeatsBitwise) {
  DeviceGemm g(Problem{DType::kBF16, 64, 4096, 4096}, 300);
  for (int splits : {1, 5}) {
    ASSERT_TRUE(Run(g, splits));
    const std::vector<uint8_t> first = g.DownloadC();
    ASSERT_TRUE(Run(g, splits));
    EXPECT_EQ(g.DownloadC(), first) << splits << " splits";
  }
}

}  // namespace
}  // namespace arbiter::kernels
