// Device tests of splitk_tiny (label gpu), through its launcher: every tile
// shape (M up to 16, 32, 64 by N up to 16, 32, 64) at ragged M, N and K, with
// K up to 262144, against an f64 reference on NaN-poisoned C; the launch
// geometry on M != N; every split plan (one CTA, clusters of 2, 4 and 8, one
// cluster and many, empty trailing slices); the determinism it claims (bitwise
// repeats, also after other shapes ran on the stream, and on a second stream);
// and what it declines. Skipped without an sm_90 GPU (thread-block clusters).
// The plan and refusal tests need no device.

#include <algorithm>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/problem.h"
#include "kernels/splitk_tiny/splitk_tiny.h"
#include "tests/kernels/common/device_gemm.h"

namespace arbiter::kernels {
namespace {

using testing::ArgsFor;
using testing::DeviceGemm;

constexpr AccuracyBudget kBudget = {kSplitKTinyBudgetAbs, kSplitKTinyBudgetRel};

struct Shape {
  int64_t m, n, k;
};

class SplitKTinyTest : public testing::Sm90StreamTest {
 protected:
  void TearDown() override {
    Sm90StreamTest::TearDown();
    if (workspace_ != nullptr) cudaFree(workspace_);
  }

  // Poisons C, launches on `stream` (default stream_) planning for `sm_count`
  // multiprocessors (default the device's) with clusters of at most
  // `max_cluster` CTAs (default the launcher's own plan), and waits.
  ::testing::AssertionResult Run(DeviceGemm& g, int sm_count = 0, cudaStream_t stream = nullptr,
                                 int max_cluster = 0) {
    g.PoisonC();
    LaunchArgs args = g.Args(sm_count != 0 ? sm_count : sm_count_);
    const SplitKTinyPlan plan =
        MakeSplitKTinyPlan(args.k, args.sm_count, max_cluster != 0 ? max_cluster : kSplitKTinyMaxCluster);
    args.workspace_bytes = max_cluster != 0 ? SplitKTinyWorkspaceBytes(args, plan) : SplitKTinyWorkspaceBytes(args);
    if (args.workspace_bytes > workspace_bytes_) {
      CUDA_OK(cudaFree(workspace_));
      CUDA_OK(cudaMalloc(&workspace_, args.workspace_bytes));
      workspace_bytes_ = args.workspace_bytes;
    }
    args.workspace = args.workspace_bytes > 0 ? workspace_ : nullptr;
    if (stream == nullptr) stream = stream_;
    const cudaError_t err =
        max_cluster != 0 ? LaunchSplitKTiny(args, plan, stream) : LaunchSplitKTiny(args, stream);
    if (err != cudaSuccess) {
      return ::testing::AssertionFailure()
             << "LaunchSplitKTiny on " << g.problem() << ": " << cudaGetErrorName(err);
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    return ::testing::AssertionSuccess();
  }

  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// Every tile shape, ragged M and N (N odd: B's rows are copied as one flat
// run), K not a multiple of 16 or of the slice (zero-filled tails), one K stage
// and thousands, and K past 65536.
TEST_F(SplitKTinyTest, MatchesReferenceOnRaggedShapes) {
  const Shape shapes[] = {{1, 1, 8},        {3, 9, 136},      {16, 16, 65536}, {13, 24, 65536},
                          {17, 5, 4104},    {31, 33, 32776},  {33, 17, 2056},  {64, 64, 8192},
                          {40, 63, 12344},  {64, 1, 1000},    {1, 64, 4096},   {50, 47, 262144},
                          {16, 64, 16384},  {64, 16, 16392}};
  uint64_t seed = 1;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(g.Matches(kBudget));
    }
  }
}

// M != N both ways, every element checked: a swapped row and column in the
// fragment-to-C mapping leaves NaN or lands out of budget.
TEST_F(SplitKTinyTest, LaunchGeometryWritesEveryElementOfNonSquareC) {
  const Shape shapes[] = {{5, 60, 4096}, {60, 5, 4096}, {2, 48, 1024}, {48, 2, 1024}, {20, 36, 8200}};
  uint64_t seed = 100;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(g.Matches(kBudget));
    }
  }
}

// Every split plan: one CTA (sm_count 1), a cluster of 2, 4 or 8 alone, 3 and
// many clusters (added by the last to arrive), and a slice count that leaves
// trailing CTAs with no K at all.
TEST_F(SplitKTinyTest, MatchesReferenceAtEverySplitPlan) {
  uint64_t seed = 200;
  for (const Shape& s : {Shape{16, 16, 65536}, Shape{13, 40, 32776}, Shape{64, 64, 8192},
                         Shape{7, 3, 1288}}) {
    DeviceGemm g(Problem{DType::kBF16, s.m, s.n, s.k}, seed++);
    for (int sm_count : {1, 2, 5, 8, 24, 100, sm_count_, 1 << 20}) {
      ASSERT_TRUE(Run(g, sm_count));
      EXPECT_TRUE(g.Matches(kBudget)) << "at sm_count " << sm_count;
    }
  }
}

// Every cluster cap (1: no distributed shared memory, the last CTA to arrive
// adds every CTA's slab; 2 and 4: more slabs, fewer ranks; 8: the launcher's
// plan), with one cluster and many, at ragged M != N: each splits the final sum
// across threads differently (one group of slabs per thread, or many).
TEST_F(SplitKTinyTest, MatchesReferenceAtEveryClusterCap) {
  uint64_t seed = 400;
  for (const Shape& s : {Shape{16, 16, 65536}, Shape{13, 40, 32776}, Shape{64, 64, 8192},
                         Shape{5, 60, 4104}, Shape{7, 3, 1288}, Shape{33, 9, 262144}}) {
    DeviceGemm g(Problem{DType::kBF16, s.m, s.n, s.k}, seed++);
    for (int max_cluster : {1, 2, 4, 8}) {
      for (int sm_count : {3, 24, sm_count_}) {
        ASSERT_TRUE(Run(g, sm_count, nullptr, max_cluster));
        EXPECT_TRUE(g.Matches(kBudget)) << "clusters of at most " << max_cluster << " at sm_count " << sm_count;
      }
    }
  }
}

// The fixed order holds at every cluster cap: bitwise repeats, with other
// plans' launches (which use the same arrival counters) in between.
TEST_F(SplitKTinyTest, RepeatsBitwiseAtEveryClusterCap) {
  uint64_t seed = 500;
  DeviceGemm between(Problem{DType::kBF16, 16, 16, 65536}, 499);
  for (const Shape& s : {Shape{16, 16, 65536}, Shape{9, 20, 32776}}) {
    DeviceGemm g(Problem{DType::kF16, s.m, s.n, s.k}, seed++);
    for (int max_cluster : {1, 2, 4, 8}) {
      ASSERT_TRUE(Run(g, 0, nullptr, max_cluster));
      ASSERT_TRUE(g.Matches(kBudget));
      const std::vector<uint8_t> first = g.DownloadC();
      for (int other : {1, 4, 8}) {
        ASSERT_TRUE(Run(between, 0, nullptr, other));
        ASSERT_TRUE(Run(g, 0, nullptr, max_cluster));
        EXPECT_TRUE(first == g.DownloadC())
            << "run after a cap-" << other << " launch differs on " << g.problem() << " at cap " << max_cluster;
      }
    }
  }
}

// Bitwise the same on a second run, after other shapes (other plans, other
// cluster counts) ran on the stream in between - each launch must leave its
// arrival counters at zero - and on another stream (its own counters).
TEST_F(SplitKTinyTest, RepeatsBitwiseAcrossRunsAndStreams) {
  cudaStream_t other = nullptr;
  CUDA_OK(cudaStreamCreate(&other));
  uint64_t seed = 300;
  DeviceGemm between(Problem{DType::kF16, 64, 64, 8192}, 299);
  for (const Shape& s : {Shape{16, 16, 65536}, Shape{13, 24, 32776}, Shape{64, 64, 131072}}) {
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      ASSERT_TRUE(g.Matches(kBudget));
      const std::vector<uint8_t> first = g.DownloadC();
      ASSERT_TRUE(Run(between, 24));
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(first == g.DownloadC()) << "second run differs on " << g.problem();
      ASSERT_TRUE(Run(g, 0, other));
      EXPECT_TRUE(first == g.DownloadC()) << "run on another stream differs on " << g.problem();
    }
  }
  CUDA_OK(cudaStreamDestroy(other));
}

// What it does not cover is refused before anything is launched, saying why.
TEST(SplitKTinyRefusalTest, DeclinesWhatItDoesNotCover) {
  alignas(16) static uint16_t buf[64];
  const auto args = [&](DType dtype, int64_t m, int64_t n, int64_t k, const void* a) {
    return ArgsFor(Problem{dtype, m, n, k}, a, buf, buf, 132);
  };
  EXPECT_EQ(SplitKTinyUnsupported(args(DType::kBF16, 64, 64, 65536, buf)), nullptr);
  EXPECT_NE(SplitKTinyUnsupported(args(DType::kF32, 16, 16, 4096, buf)), nullptr);
  EXPECT_NE(SplitKTinyUnsupported(args(DType::kBF16, 65, 16, 4096, buf)), nullptr);
  EXPECT_NE(SplitKTinyUnsupported(args(DType::kBF16, 16, 65, 4096, buf)), nullptr);
  EXPECT_NE(SplitKTinyUnsupported(args(DType::kBF16, 16, 16, 4100, buf)), nullptr);
  EXPECT_NE(SplitKTinyUnsupported(args(DType::kBF16, 16, 16, 4096, buf + 1)), nullptr);
  for (const LaunchArgs& a : {args(DType::kF32, 16, 16, 4096, buf), args(DType::kBF16, 65, 16, 4096, buf),
                              args(DType::kBF16, 16, 16, 4100, buf), args(DType::kBF16, 16, 16, 4096, buf + 1),
                              args(DType::kBF16, 0, 16, 4096, buf)}) {
    EXPECT_EQ(LaunchSplitKTiny(a, nullptr), cudaErrorInvalidValue);
  }
  // A plan that does not cover K, or not in whole power-of-two clusters.
  const LaunchArgs ok = args(DType::kBF16, 16, 16, 4096, buf);
  SplitKTinyPlan short_plan = MakeSplitKTinyPlan(4096, 1);
  short_plan.k_slice -= 16;
  SplitKTinyPlan odd_cluster = MakeSplitKTinyPlan(4096, 132);
  odd_cluster.cluster = 3;
  SplitKTinyPlan ragged_grid = MakeSplitKTinyPlan(4096, 132);
  ragged_grid.ctas += 1;
  for (const SplitKTinyPlan& plan : {short_plan, odd_cluster, ragged_grid}) {
    EXPECT_EQ(LaunchSplitKTiny(ok, plan, nullptr), cudaErrorInvalidValue);
  }
  // Several clusters need their workspace slabs.
  LaunchArgs many = args(DType::kBF16, 16, 16, 65536, buf);
  ASSERT_GT(SplitKTinyWorkspaceBytes(many), 0u);
  EXPECT_EQ(LaunchSplitKTiny(many, nullptr), cudaErrorInvalidValue);
}

// The plan covers K with 16-row-aligned slices, at most one CTA per SM, in
// power-of-two clusters of at most 8 that divide the grid.
TEST(SplitKTinyPlanTest, SlicesCoverKInWholeClusters) {
  for (int sm_count : {1, 2, 3, 7, 8, 9, 100, 132, 1 << 20}) {
    for (int64_t k : {int64_t{8}, int64_t{128}, int64_t{136}, int64_t{1000}, int64_t{4096}, int64_t{32776},
                      int64_t{65536}, int64_t{262144}, int64_t{1} << 30}) {
      const SplitKTinyPlan plan = MakeSplitKTinyPlan(k, sm_count);
      EXPECT_GE(plan.ctas * plan.k_slice, k) << k << " on " << sm_count;
      EXPECT_LT((plan.ctas - plan.cluster) * plan.k_slice, k) << "a whole cluster without K";
      EXPECT_EQ(plan.k_slice % 16, 0);
      EXPECT_LE(plan.ctas, std::max(sm_count, 1));
      EXPECT_TRUE(plan.cluster == 1 || plan.cluster == 2 || plan.cluster == 4 || plan.cluster == 8);
      EXPECT_EQ(plan.ctas % plan.cluster, 0);
    }
  }
  // A cap on the cluster: the largest power of two within it, never above 8.
  for (int cap : {1, 2, 3, 4, 8, 16}) {
    for (int64_t k : {int64_t{8}, int64_t{1288}, int64_t{65536}}) {
      const SplitKTinyPlan plan = MakeSplitKTinyPlan(k, 132, cap);
      EXPECT_LE(plan.cluster, std::min(cap, 8)) << k << " capped at " << cap;
      EXPECT_EQ(plan.ctas % plan.cluster, 0);
      EXPECT_GE(plan.ctas * plan.k_slice, k);
    }
  }
  EXPECT_EQ(MakeSplitKTinyPlan(66000, 132, 1).ctas, 129);  // 512-row slices, no cluster to round to
  EXPECT_EQ(MakeSplitKTinyPlan(66000, 132).ctas, 128);     // 528-row slices in 16 clusters of 8
  EXPECT_EQ(MakeSplitKTinyPlan(65536, 132, 4).cluster, 4);
  EXPECT_EQ(MakeSplitKTinyPlan(65536, 132).ctas, 128);  // 16 clusters of 8, 512 rows each
  EXPECT_EQ(MakeSplitKTinyPlan(65536, 132).k_slice, 512);
}

}  // namespace
}  // namespace arbiter::kernels
