// Device tests of the skinny family (label gpu), through its launcher: every
// member (M from 1 to 128 in groups of 8 tokens) and every load width (N % 8,
// % 4, % 2 and odd N; K % 4 and ragged K) against an f64 reference on
// NaN-poisoned C; the launch geometry on M != N; every split plan (one CTA per
// strip, cluster splits, workspace splits); and the determinism it claims
// (bitwise repeats, rows of C independent of M). Skipped without an sm_90 GPU
// (the splits of a strip are added through a thread-block cluster).
// The plan tests need no device.

#include <algorithm>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/problem.h"
#include "kernels/skinny/skinny.h"
#include "tests/kernels/common/device_gemm.h"

namespace arbiter::kernels {
namespace {

using testing::DeviceGemm;

constexpr AccuracyBudget kBudget = {kSkinnyBudgetAbs, kSkinnyBudgetRel};

struct Shape {
  int64_t m, n, k;
};

void* Workspace(size_t bytes) {
  static void* ptr = nullptr;
  static size_t size = 0;
  if (bytes == 0) return nullptr;
  if (bytes > size) {
    CUDA_OK(cudaFree(ptr));
    CUDA_OK(cudaMalloc(&ptr, bytes));
    size = bytes;
  }
  return ptr;
}

class SkinnyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ARBITER_SKIP_WITHOUT_GPU(90);
    CUDA_OK(cudaStreamCreate(&stream_));
    sm_count_ = testing::DeviceSmCount();
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Poisons C, launches with A read from `a` (default g.a()), planning for
  // `sm_count` multiprocessors (default the device's), and waits.
  ::testing::AssertionResult Run(DeviceGemm& g, const void* a = nullptr, int sm_count = 0) {
    g.PoisonC();
    LaunchArgs args;
    args.dtype = g.problem().dtype;
    args.a = a != nullptr ? a : g.a();
    args.b = g.b();
    args.c = g.c();
    args.m = g.problem().m;
    args.n = g.problem().n;
    args.k = g.problem().k;
    args.sm_count = sm_count != 0 ? sm_count : sm_count_;
    args.workspace_bytes = SkinnyWorkspaceBytes(args);
    args.workspace = Workspace(args.workspace_bytes);
    const cudaError_t err = LaunchSkinny(args, stream_);
    if (err != cudaSuccess) {
      return ::testing::AssertionFailure() << "LaunchSkinny on " << g.problem() << ": "
                                           << cudaGetErrorName(err);
    }
    CUDA_OK(cudaStreamSynchronize(stream_));
    return ::testing::AssertionSuccess();
  }

  cudaStream_t stream_ = nullptr;
  int sm_count_ = 0;
};

// Each member (TG = 1, 2, 4 groups of 8 tokens) at ragged M, each B
// load width (N % 8 == 0: 16 bytes; % 4: 8; % 2: 4; odd: 2-byte elements), K
// not a multiple of 16, of 4 (element loads of A), narrow N with long K
// (workspace splits), and a vocabulary-sized N.
TEST_F(SkinnyTest, MatchesReferenceOnRaggedShapes) {
  const Shape shapes[] = {{1, 1, 1},       {1, 4096, 4096},  {3, 9, 127},     {5, 131, 257},
                          {8, 264, 1024},  {9, 40, 4100},    {13, 333, 2049}, {16, 16, 65536},
                          {17, 30522, 96}, {31, 32001, 200}, {32, 1030, 4095}, {24, 72, 1024},
                          {29, 4094, 777}, {32, 520, 1000},  {2, 300001, 40}};
  uint64_t seed = 1;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(g.Matches(kBudget));
    }
  }
}

// M != N both ways, every element checked: a swapped grid axis leaves NaN.
TEST_F(SkinnyTest, LaunchGeometryWritesEveryElementOfNonSquareC) {
  const Shape shapes[] = {{16, 200, 64}, {13, 3, 64}, {1, 48, 64}, {32, 40, 64}, {30, 520, 72}};
  uint64_t seed = 100;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(g.Matches(kBudget));
    }
  }
}

// The split plan follows N, K and the SM count: one CTA per strip, cluster
// splits (up to 8) and workspace splits must all be within budget.
TEST_F(SkinnyTest, MatchesReferenceAtEverySplitPlan) {
  uint64_t seed = 200;
  for (const Shape& s : {Shape{1, 4096, 4096}, Shape{16, 40, 8200}, Shape{5, 33, 3001},
                         Shape{3, 1000, 20000}, Shape{32, 136, 2048}}) {
    DeviceGemm g(Problem{DType::kBF16, s.m, s.n, s.k}, seed++);
    for (int sm_count : {1, 8, 132, 1 << 20}) {
      ASSERT_TRUE(Run(g, nullptr, sm_count));
      EXPECT_TRUE(g.Matches(kBudget)) << "at sm_count " << sm_count;
    }
  }
}

TEST_F(SkinnyTest, RepeatsBitwise) {
  uint64_t seed = 300;
  for (const Shape& s : {Shape{13, 333, 2049}, Shape{16, 16, 65536}, Shape{32, 4100, 3000}}) {
    DeviceGemm g(Problem{DType::kF16, s.m, s.n, s.k}, seed++);
    ASSERT_TRUE(Run(g));
    const std::vector<uint8_t> first = g.DownloadC();
    ASSERT_TRUE(Run(g));
    EXPECT_TRUE(first == g.DownloadC()) << "differs between runs on " << g.problem();
  }
}

// The batch_invariant claim: the first m rows of C are bitwise the same at
// M = m as inside M = 32, across every member M selects.
TEST_F(SkinnyTest, RowsDoNotDependOnM) {
  uint64_t seed = 400;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& base_shape : {Shape{32, 1000, 1000}, Shape{32, 30522, 64}}) {
      DeviceGemm base(Problem{dtype, base_shape.m, base_shape.n, base_shape.k}, seed++);
      ASSERT_TRUE(Run(base));
      const std::vector<uint8_t> all = base.DownloadC();
      for (int64_t m : {1, 3, 8, 9, 16, 17, 31}) {
        DeviceGemm part(base, m);
        ASSERT_TRUE(Run(part));
        const std::vector<uint8_t> rows = part.DownloadC();
        EXPECT_TRUE(std::equal(rows.begin(), rows.end(), all.begin()))
            << "the first " << m << " rows of C differ between M=" << m << " and M=32 ("
            << DTypeName(dtype) << ", N=" << base_shape.n << ")";
      }
    }
  }
}

// A 2 bytes off alignment takes the element loads of A: same bits.
TEST_F(SkinnyTest, LoadPathDoesNotChangeBits) {
  uint64_t seed = 500;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    DeviceGemm g(Problem{dtype, 11, 264, 1024}, seed++);
    ASSERT_TRUE(Run(g));
    EXPECT_TRUE(g.Matches(kBudget));
    const std::vector<uint8_t> aligned = g.DownloadC();
    ASSERT_TRUE(Run(g, g.misaligned_a()));
    EXPECT_TRUE(g.Matches(kBudget));
    EXPECT_TRUE(aligned == g.DownloadC()) << "load paths differ on " << g.problem();
  }
}

// The plan never looks at M (its signature has none), keeps clusters portable
// (<= 8 CTAs), slices K in whole 32-row batches and covers it.
TEST(SkinnyPlanTest, SlicesCoverKInWholeBatchesWithPortableClusters) {
  for (int64_t n : {1, 16, 1000, 4096, 30522, 256000}) {
    for (int64_t k : {1, 64, 777, 4096, 65536}) {
      for (int sms : {1, 8, 132}) {
        const SkinnyPlan plan = MakeSkinnyPlan(n, k, sms);
        EXPECT_GE(plan.splits, 1);
        EXPECT_EQ(plan.k_chunk % 32, 0);
        // Slices of k_chunk rows, 4 per CTA: the last CTA holds K's end.
        EXPECT_GE(int64_t{plan.splits} * 4 * plan.k_chunk, k) << n << " " << k << " " << sms;
        EXPECT_LT(int64_t{plan.splits - 1} * 4 * plan.k_chunk, k) << n << " " << k << " " << sms;
        if (!plan.workspace) {
          EXPECT_LE(plan.splits, 8) << n << " " << k << " " << sms;
        }
        if (plan.splits == 1) {
          EXPECT_FALSE(plan.workspace);
        }
      }
    }
  }
}

// Refusals need no device: they return before any CUDA call.
TEST(SkinnyLauncherTest, RefusesWhatItDoesNotCover) {
  LaunchArgs args;
  args.dtype = DType::kBF16;
  args.a = args.b = reinterpret_cast<const void*>(uintptr_t{256});
  args.c = reinterpret_cast<void*>(uintptr_t{256});
  args.m = kSkinnyMaxM + 1;
  args.n = args.k = 64;
  EXPECT_EQ(LaunchSkinny(args, nullptr), cudaErrorInvalidValue);
  args.m = 16;
  args.dtype = DType::kF32;
  EXPECT_EQ(LaunchSkinny(args, nullptr), cudaErrorInvalidValue);
  args.dtype = DType::kF16;
  args.n = 16;
  args.k = 65536;  // one strip: K splits through workspace
  ASSERT_GT(SkinnyWorkspaceBytes(args), 0u);
  EXPECT_EQ(LaunchSkinny(args, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace arbiter::kernels
