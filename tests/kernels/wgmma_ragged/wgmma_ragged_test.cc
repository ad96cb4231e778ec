// Tests of wgmma_ragged (label gpu), through its launcher: ragged M, N and K
// (N odd and even, N below the 256-column tile and below 8, K not a multiple
// of the 64-deep k-block), both dtypes, the persistent grid's walk at M != N
// on 1 to all SMs, K = 65536, against an f64 reference on NaN-poisoned C with
// a guard; bitwise repeats (run to run) and rows equal bit for bit at
// different M (batch invariant). Skipped without an sm_90 GPU. The plan,
// refusal and contract tests need no device.

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "engine/backend.h"
#include "engine/candidate.h"
#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/problem.h"
#include "kernels/wgmma_ragged/wgmma_ragged.h"
#include "kernels/wgmma_ragged/wgmma_ragged_candidate.h"
#include "tests/kernels/common/device_gemm.h"

namespace arbiter::kernels {
namespace {

using testing::DeviceGemm;

constexpr AccuracyBudget kBudget = {kWgmmaRaggedBudgetAbs, kWgmmaRaggedBudgetRel};

struct Shape {
  int64_t m, n, k;
};

// The grid is min(tiles, SMs) and the walk visits every tile exactly once,
// down M inside a group of 16 tile rows, then across N.
TEST(WgmmaRaggedPlanTest, WalkCoversEveryTileOnce) {
  for (const Shape& s : {Shape{512, 30522, 768}, Shape{8, 32001, 4096}, Shape{3000, 1001, 64},
                         Shape{1, 7, 8}, Shape{2049, 300, 8}}) {
    for (int sms : {1, 7, 132}) {
      const WgmmaRaggedPlan plan = MakeWgmmaRaggedPlan(s.m, s.n, sms);
      EXPECT_EQ(plan.tiles_m, (s.m + 127) / 128);
      EXPECT_EQ(plan.tiles_n, (s.n + 255) / 256);
      EXPECT_EQ(plan.grid_x, std::min(plan.tiles(), sms));
    }
    const WgmmaRaggedPlan plan = MakeWgmmaRaggedPlan(s.m, s.n, 132);
    std::set<std::pair<int, int>> seen;
    for (int t = 0; t < plan.tiles(); ++t) {
      int mt = -1, nt = -1;
      WgmmaRaggedTileAt(t, plan.tiles_m, plan.tiles_n, &mt, &nt);
      ASSERT_GE(mt, 0);
      ASSERT_LT(mt, plan.tiles_m);
      ASSERT_GE(nt, 0);
      ASSERT_LT(nt, plan.tiles_n);
      seen.insert({mt, nt});
    }
    EXPECT_EQ(static_cast<int>(seen.size()), plan.tiles());
  }
  // Consecutive indices walk down M first: tile 1 is the second tile row.
  int mt = 0, nt = 0;
  WgmmaRaggedTileAt(1, 4, 120, &mt, &nt);
  EXPECT_EQ(mt, 1);
  EXPECT_EQ(nt, 0);
  WgmmaRaggedTileAt(4, 4, 120, &mt, &nt);
  EXPECT_EQ(mt, 0);
  EXPECT_EQ(nt, 1);
}

TEST(WgmmaRaggedPlanTest, RefusesWhatItDoesNotCover) {
  alignas(16) static uint16_t buffer[64];
  LaunchArgs args;
  args.dtype = DType::kF16;
  args.a = buffer;
  args.b = buffer;
  args.c = buffer;
  args.m = 17;
  args.n = 30;
  args.k = 64;
  EXPECT_EQ(WgmmaRaggedUnsupportedReason(args), nullptr);
  args.n = 31;
  args.c = buffer + 1;  // 2-byte stores at odd N
  EXPECT_EQ(WgmmaRaggedUnsupportedReason(args), nullptr);
  args.c = buffer;
  args.n = 30;
  LaunchArgs bad = args;
  bad.n = 32;  // the TMA families' ground
  EXPECT_NE(WgmmaRaggedUnsupportedReason(bad), nullptr);
  bad = args;
  bad.k = 60;
  EXPECT_NE(WgmmaRaggedUnsupportedReason(bad), nullptr);
  bad = args;
  bad.a = buffer + 1;
  EXPECT_NE(WgmmaRaggedUnsupportedReason(bad), nullptr);
  bad = args;
  bad.b = buffer + 4;  // 8 bytes past a 16-byte boundary
  EXPECT_NE(WgmmaRaggedUnsupportedReason(bad), nullptr);
  bad = args;
  bad.c = buffer + 1;  // even N stores 4-byte words
  EXPECT_NE(WgmmaRaggedUnsupportedReason(bad), nullptr);
  bad = args;
  bad.dtype = DType::kF32;
  EXPECT_NE(WgmmaRaggedUnsupportedReason(bad), nullptr);
  bad = args;
  bad.m = 0;
  EXPECT_NE(WgmmaRaggedUnsupportedReason(bad), nullptr);
  EXPECT_EQ(LaunchWgmmaRagged(bad, nullptr), cudaErrorInvalidValue);
}

// The contract the candidate declares; N % 8 == 0 is declined (UNIMPLEMENTED,
// naming why) before any launch or stream use.
TEST(WgmmaRaggedCandidateTest, DeclaresItsContractAndDeclinesAlignedN) {
  const CandidateSpec spec = MakeWgmmaRaggedCandidate();
  EXPECT_EQ(spec.name, "wgmma_ragged");
  ASSERT_EQ(spec.members.size(), 2u);
  for (const CandidateMember& member : spec.members) {
    EXPECT_EQ(member.contract.arch, "sm_90a");
    EXPECT_EQ(member.contract.determinism, Determinism::kBatchInvariant);
    EXPECT_EQ(member.contract.shape.align_k, 8);
    EXPECT_EQ(member.contract.shape.align_n, 1);
    EXPECT_EQ(member.contract.tile.rows, kWgmmaRaggedTileM);
    EXPECT_EQ(member.contract.tile.cols, kWgmmaRaggedTileN);
    EXPECT_EQ(member.contract.accuracy.abs, kWgmmaRaggedBudgetAbs);
    EXPECT_EQ(member.contract.accuracy.rel, kWgmmaRaggedBudgetRel);
  }
  alignas(16) static uint16_t buffer[64];
  GemmArgs g;
  g.problem = Problem{DType::kBF16, 17, 64, 64};
  g.a = buffer;
  g.b = buffer;
  g.c = buffer;
  const absl::Status status = spec.Member(DType::kBF16)->run(g);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_NE(status.message().find("N % 8 == 0"), std::string_view::npos) << status;
}

class WgmmaRaggedTest : public testing::Sm90StreamTest {
 protected:
  // Poisons C, launches on `sms` SMs' worth of grid (0: the device's) and waits.
  ::testing::AssertionResult Run(DeviceGemm& g, int sms = 0) {
    g.PoisonC();
    LaunchArgs args = g.Args(sms > 0 ? sms : sm_count_);
    const cudaError_t err = LaunchWgmmaRagged(args, stream_);
    if (err != cudaSuccess) {
      return ::testing::AssertionFailure()
             << "LaunchWgmmaRagged on " << g.problem() << ": " << cudaGetErrorName(err);
    }
    const cudaError_t sync = cudaStreamSynchronize(stream_);
    if (sync != cudaSuccess) {
      return ::testing::AssertionFailure()
             << "LaunchWgmmaRagged on " << g.problem() << ": " << cudaGetErrorName(sync);
    }
    return ::testing::AssertionSuccess();
  }

};

// Every misalignment a row can have (N odd: s_k takes all 8 values; N = 2 mod
// 8 and 6 mod 8: 4 values), N below one tile and below 8 (N = 1..7), the last
// tile partly past N, ragged M, K not a multiple of 64 (a zero-filled tail
// k-block) and K = 8, both dtypes: every element of C written and within
// budget, the guard untouched. B is allocated to its exact size: the device
// run repeats this test under compute-sanitizer memcheck, which sees any load
// past its end.
TEST_F(WgmmaRaggedTest, MatchesReferenceAtRaggedShapes) {
  const Shape shapes[] = {{300, 1001, 520}, {136, 30522, 72}, {1, 30, 64},    {77, 6, 8},
                          {129, 257, 200},  {8, 4099, 768},   {513, 250, 1032}, {200, 3, 136},
                          {64, 1, 24},      {130, 510, 64},   {5, 262, 4104}};
  uint64_t seed = 1;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(g.Matches(kBudget));
    }
  }
}

// The launch geometry: M > N and M < N, on a persistent grid of 1, 3 and 7
// CTAs and on every SM: a swapped axis or a wrong tile walk leaves NaN in C
// or a wrong sum.
TEST_F(WgmmaRaggedTest, LaunchGeometryAtMNotN) {
  const Shape shapes[] = {{300, 770, 136}, {1000, 130, 64}, {2100, 35, 16}};
  uint64_t seed = 100;
  for (const Shape& s : shapes) {
    DeviceGemm g(Problem{DType::kBF16, s.m, s.n, s.k}, seed++);
    for (int sms : {1, 3, 7, 0}) {
      ASSERT_TRUE(Run(g, sms));
      EXPECT_TRUE(g.Matches(kBudget)) << "grid of " << sms << " CTAs";
    }
  }
}

// The accuracy claim at the longest K the contract names.
TEST_F(WgmmaRaggedTest, WithinBudgetAtK65536) {
  uint64_t seed = 200;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    DeviceGemm g(Problem{dtype, 17, 131, 65536}, seed++);
    ASSERT_TRUE(Run(g));
    EXPECT_TRUE(g.Matches(kBudget));
  }
}

// run_to_run: the same launch twice gives the same bytes.
TEST_F(WgmmaRaggedTest, RepeatsBitwise) {
  DeviceGemm g(Problem{DType::kF16, 512, 30522, 768}, 300);
  ASSERT_TRUE(Run(g));
  const std::vector<uint8_t> first = g.DownloadC();
  ASSERT_TRUE(Run(g));
  EXPECT_EQ(g.DownloadC(), first);
}

// batch_invariant: the first rows of A alone give the same rows of C, bit for
// bit, as inside the larger M.
TEST_F(WgmmaRaggedTest, RowsDoNotDependOnM) {
  DeviceGemm base(Problem{DType::kBF16, 300, 1001, 264}, 400);
  ASSERT_TRUE(Run(base));
  const std::vector<uint8_t> all = base.DownloadC();
  for (int64_t m : {1, 37, 129}) {
    DeviceGemm part(base, m);
    ASSERT_TRUE(Run(part));
    const std::vector<uint8_t> rows = part.DownloadC();
    ASSERT_EQ(rows.size(), static_cast<size_t>(m * 1001 * 2));
    EXPECT_TRUE(std::equal(rows.begin(), rows.end(), all.begin())) << "M = " << m;
  }
}

}  // namespace
}  // namespace arbiter::kernels
