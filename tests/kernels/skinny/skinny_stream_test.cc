// Device tests of skinny_stream (label gpu), through its launcher: every member
// (M from 1 to 64 in groups of 8 tokens), every B copy width (N % 8 == 0, even
// and odd N), K % 8 != 0 (A by elements) and ragged K, against an f64
// reference on NaN-poisoned C; the launch geometry on M != N; every split plan
// (one CTA per strip, cluster splits, workspace splits) and every built config;
// and the determinism it claims (bitwise repeats, rows of C independent of M).
// Skipped without an sm_90 GPU (the splits of a strip are added in a
// thread-block cluster). The plan and refusal tests need no device.

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/problem.h"
#include "kernels/skinny/skinny_stream.h"
#include "tests/kernels/common/device_gemm.h"

namespace arbiter::kernels {
namespace {

using testing::DeviceGemm;

constexpr AccuracyBudget kBudget = {kSkinnyStreamBudgetAbs, kSkinnyStreamBudgetRel};

struct Shape {
  int64_t m, n, k;
};

class SkinnyStreamTest : public testing::Sm90StreamTest {
 protected:
  void TearDown() override {
    Sm90StreamTest::TearDown();
    if (workspace_ != nullptr) cudaFree(workspace_);
  }

  // Poisons C, launches `config` with A read from `a` (default g.a()),
  // planning for `sm_count` multiprocessors (default the device's), and waits.
  ::testing::AssertionResult Run(DeviceGemm& g,
                                 const SkinnyStreamConfig& config = kSkinnyStreamDefault,
                                 const void* a = nullptr, int sm_count = 0) {
    g.PoisonC();
    LaunchArgs args = g.Args(sm_count != 0 ? sm_count : sm_count_);
    args.a = a != nullptr ? a : g.a();
    args.workspace_bytes = SkinnyStreamWorkspaceBytes(args, config);
    if (args.workspace_bytes > workspace_bytes_) {
      CUDA_OK(cudaFree(workspace_));
      CUDA_OK(cudaMalloc(&workspace_, args.workspace_bytes));
      workspace_bytes_ = args.workspace_bytes;
    }
    args.workspace = args.workspace_bytes > 0 ? workspace_ : nullptr;
    const cudaError_t err = LaunchSkinnyStream(args, config, stream_);
    if (err != cudaSuccess) {
      return ::testing::AssertionFailure() << "LaunchSkinnyStream(" << config.name << ") on "
                                           << g.problem() << ": " << cudaGetErrorName(err);
    }
    CUDA_OK(cudaStreamSynchronize(stream_));
    return ::testing::AssertionSuccess();
  }

  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// Each member (TG = 1, 2, 4, 8) at ragged M, each B copy width (N % 8 == 0: 16
// bytes; even N: 4; odd: 2-byte elements), K not a multiple of 32 or of 8 (A
// by elements), a partial last strip, narrow N with long K (workspace splits),
// and a vocabulary-sized N.
TEST_F(SkinnyStreamTest, MatchesReferenceOnRaggedShapes) {
  const Shape shapes[] = {{1, 1, 1},        {3, 9, 127},      {5, 131, 257},  {8, 264, 1024},
                          {9, 40, 4100},    {13, 333, 2049},  {16, 16, 65536}, {17, 30522, 96},
                          {31, 32001, 200}, {33, 1030, 4095}, {40, 72, 1024}, {57, 4094, 777},
                          {64, 520, 1000},  {2, 300001, 40},  {64, 1, 300}};
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
TEST_F(SkinnyStreamTest, LaunchGeometryWritesEveryElementOfNonSquareC) {
  const Shape shapes[] = {{16, 200, 64}, {13, 3, 64}, {1, 48, 64}, {64, 40, 64}, {30, 520, 72}};
  uint64_t seed = 100;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(g.Matches(kBudget));
    }
  }
}

// The split plan follows N, K, the SM count and the config: one CTA per strip,
// cluster splits (up to 8) and workspace splits must all be within budget, in
// every built config (bf16, N % 8 == 0: what every config is built for).
TEST_F(SkinnyStreamTest, EveryConfigMatchesReferenceAtEverySplitPlan) {
  uint64_t seed = 200;
  // 40 x 4096 x 4096: five live token groups of eight (an odd count computed
  // in pairs), K split over 8-CTA clusters with the ring cut to the one-group
  // footprint.
  for (const Shape& s : {Shape{1, 4096, 4096}, Shape{16, 40, 8200}, Shape{5, 1024, 3001},
                         Shape{64, 1000, 2000}, Shape{24, 136, 2048}, Shape{40, 4096, 4096}}) {
    DeviceGemm g(Problem{DType::kBF16, s.m, s.n, s.k}, seed++);
    for (const SkinnyStreamConfig& config : kSkinnyStreamConfigs) {
      for (int sm_count : {1, 8, 132, 1 << 20}) {
        ASSERT_TRUE(Run(g, config, nullptr, sm_count));
        EXPECT_TRUE(g.Matches(kBudget)) << config.name << " at sm_count " << sm_count;
      }
    }
  }
}

// The configs built for an even ragged N (4-byte B copies: the default and
// s128x4c4), f16 and bf16, at ragged M (odd token-group counts), N and K, one
// and several splits: within budget, every element of the NaN-poisoned C written.
TEST_F(SkinnyStreamTest, RaggedNConfigsMatchReference) {
  const Shape shapes[] = {{17, 30522, 200}, {40, 4094, 777}, {57, 1030, 2056}, {9, 3002, 4100}};
  uint64_t seed = 220;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      for (const char* name : {"s128x6c2", "s128x4c4"}) {
        const SkinnyStreamConfig* config = nullptr;
        for (const SkinnyStreamConfig& c : kSkinnyStreamConfigs) {
          if (std::string_view(c.name) == name) config = &c;
        }
        ASSERT_NE(config, nullptr) << name;
        ASSERT_TRUE(Run(g, *config));
        EXPECT_TRUE(g.Matches(kBudget)) << name;
      }
    }
  }
}

// The registered wide config in both dtypes (f16 is built for it alone among
// the 256-column configs), at 9-16 rows and M < 9, one strip to many, with
// cluster and workspace split plans: within budget on NaN-poisoned C.
TEST_F(SkinnyStreamTest, WideConfigMatchesReferenceInBothDtypes) {
  const Shape shapes[] = {{16, 4096, 4096}, {9, 1032, 3000}, {13, 256, 65536}, {3, 18176, 264}};
  uint64_t seed = 240;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g, kSkinnyStreamWide));
      EXPECT_TRUE(g.Matches(kBudget)) << kSkinnyStreamWide.name;
    }
  }
}

// A narrow N against a long K (16 x 16 x 65536, the large-K tiny-MN shape of
// the public list, and 13 x 24 x 65536, M != N): one strip whose warps mostly
// lie past N, K split into hundreds of workspace slabs (or clusters where the
// SM count is small). Every config within budget at K = 65536, and bitwise
// the same on a second run.
TEST_F(SkinnyStreamTest, EveryConfigIsAccurateAndRepeatsBitwiseAtNarrowNLongK) {
  uint64_t seed = 250;
  for (const Shape& s : {Shape{16, 16, 65536}, Shape{13, 24, 65536}}) {
    DeviceGemm g(Problem{DType::kBF16, s.m, s.n, s.k}, seed++);
    for (const SkinnyStreamConfig& config : kSkinnyStreamConfigs) {
      for (int sm_count : {8, sm_count_}) {
        ASSERT_TRUE(Run(g, config, nullptr, sm_count));
        EXPECT_TRUE(g.Matches(kBudget)) << config.name << " at sm_count " << sm_count;
        const std::vector<uint8_t> first = g.DownloadC();
        ASSERT_TRUE(Run(g, config, nullptr, sm_count));
        EXPECT_TRUE(first == g.DownloadC())
            << config.name << " differs between runs on " << g.problem();
      }
    }
  }
}

TEST_F(SkinnyStreamTest, RepeatsBitwise) {
  uint64_t seed = 300;
  for (const Shape& s : {Shape{13, 333, 2049}, Shape{16, 16, 65536}, Shape{64, 4100, 3000}}) {
    DeviceGemm g(Problem{DType::kF16, s.m, s.n, s.k}, seed++);
    ASSERT_TRUE(Run(g));
    const std::vector<uint8_t> first = g.DownloadC();
    ASSERT_TRUE(Run(g));
    EXPECT_TRUE(first == g.DownloadC()) << "differs between runs on " << g.problem();
  }
}

// The batch_invariant claim: the first m rows of C are bitwise the same at
// M = m as inside M = 64, across every member M selects.
TEST_F(SkinnyStreamTest, RowsDoNotDependOnM) {
  uint64_t seed = 400;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& base_shape : {Shape{64, 1000, 1000}, Shape{64, 30522, 64}}) {
      DeviceGemm base(Problem{dtype, base_shape.m, base_shape.n, base_shape.k}, seed++);
      ASSERT_TRUE(Run(base));
      const std::vector<uint8_t> all = base.DownloadC();
      for (int64_t m : {1, 3, 8, 9, 16, 17, 32, 33, 63}) {
        DeviceGemm part(base, m);
        ASSERT_TRUE(Run(part));
        const std::vector<uint8_t> rows = part.DownloadC();
        EXPECT_TRUE(std::equal(rows.begin(), rows.end(), all.begin()))
            << "the first " << m << " rows of C differ between M=" << m << " and M=64 ("
            << DTypeName(dtype) << ", N=" << base_shape.n << ")";
      }
    }
  }
}

// A 2 bytes off alignment takes the element copies of A: same bits.
TEST_F(SkinnyStreamTest, LoadPathDoesNotChangeBits) {
  uint64_t seed = 500;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    DeviceGemm g(Problem{dtype, 11, 264, 1024}, seed++);
    ASSERT_TRUE(Run(g));
    EXPECT_TRUE(g.Matches(kBudget));
    const std::vector<uint8_t> aligned = g.DownloadC();
    ASSERT_TRUE(Run(g, kSkinnyStreamDefault, g.misaligned_a()));
    EXPECT_TRUE(g.Matches(kBudget));
    EXPECT_TRUE(aligned == g.DownloadC()) << "load paths differ on " << g.problem();
  }
}

// The plan never looks at M (its signature has none), keeps clusters portable
// (<= 8 CTAs), gives each CTA whole 32-row stages and covers K exactly.
TEST(SkinnyStreamPlanTest, SplitsCoverKInWholeStagesWithPortableClusters) {
  for (const SkinnyStreamConfig& config : kSkinnyStreamConfigs) {
    for (int64_t n : {1, 16, 1000, 4096, 30522, 256000}) {
      for (int64_t k : {1, 64, 777, 4096, 65536}) {
        for (int sms : {1, 8, 132}) {
          const SkinnyStreamPlan plan = MakeSkinnyStreamPlan(n, k, sms, config);
          SCOPED_TRACE(::testing::Message() << config.name << " N=" << n << " K=" << k
                                            << " SMs=" << sms);
          EXPECT_GE(plan.splits, 1);
          EXPECT_EQ(plan.k_chunk % 32, 0);
          EXPECT_GE(int64_t{plan.splits} * plan.k_chunk, k);
          EXPECT_LT(int64_t{plan.splits - 1} * plan.k_chunk, k);
          if (!plan.workspace) {
            EXPECT_LE(plan.splits, 8);
          }
          if (plan.splits == 1) {
            EXPECT_FALSE(plan.workspace);
          }
          if (!config.cluster && plan.splits > 1) {
            EXPECT_TRUE(plan.workspace);
          }
        }
      }
    }
  }
}

// Refusals need no device: they return before any CUDA call.
TEST(SkinnyStreamLauncherTest, RefusesWhatItDoesNotCover) {
  LaunchArgs args;
  args.dtype = DType::kBF16;
  args.a = args.b = reinterpret_cast<const void*>(uintptr_t{256});
  args.c = reinterpret_cast<void*>(uintptr_t{256});
  args.m = kSkinnyStreamMaxM + 1;
  args.n = args.k = 64;
  EXPECT_EQ(LaunchSkinnyStream(args, kSkinnyStreamDefault, nullptr), cudaErrorInvalidValue);
  args.m = 16;
  args.dtype = DType::kF32;
  EXPECT_EQ(LaunchSkinnyStream(args, kSkinnyStreamDefault, nullptr), cudaErrorInvalidValue);
  args.dtype = DType::kF16;
  args.n = 16;
  args.k = 65536;  // one strip: K splits through workspace
  ASSERT_GT(SkinnyStreamWorkspaceBytes(args, kSkinnyStreamDefault), 0u);
  EXPECT_EQ(LaunchSkinnyStream(args, kSkinnyStreamDefault, nullptr), cudaErrorInvalidValue);
  // The bench-only configs (s256x6c1 here) are built for bf16 only.
  args.n = args.k = 64;
  EXPECT_EQ(LaunchSkinnyStream(args, kSkinnyStreamConfigs[3], nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace arbiter::kernels
