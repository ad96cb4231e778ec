// Device tests of skinny_stream (label gpu), through its launcher: every member
// (M from 1 to 64 in groups of 8 tokens), every B copy width (N % 8 == 0, even
// and odd N), K % 8 != 0 (A by elements) and ragged K, against an f64
// reference on NaN-poisoned C; the launch geometry on M != N; every split plan
// (one CTA per strip, cluster splits, workspace splits) and every built config;
// and the determinism it claims (bitwise repeats, rows of C independent of M).
// The span config (kSkinnyStreamRagged) at ragged N: within budget, the same
// bits as the default config, nothing read past B's last byte. Skipped without
// an sm_90 GPU (the splits of a strip are added in a thread-block cluster). The
// plan, span-coverage and refusal tests need no device.

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/problem.h"
#include "kernels/skinny/skinny_spans.h"
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

// The span config at ragged N, odd and even, M in {1, 3, 8, 13, 16}, K not a
// multiple of 32 (and K % 8 != 0: A by elements), through the registered
// launcher, with one CTA per strip, cluster splits and workspace splits.
// DeviceGemm allocates B exactly, and at 8 x 1001 x 77, 13 x 50257 x 36 and
// 16 x 333 x 2049 (K N % 8 = 5, 4, 5) B's last row ends inside a 16-byte chunk
// at the very end of the allocation (SpanConfigReadsNothingPastTheEndOfB is the
// small one bench/skinny/ragged_device_run.sh runs under compute-sanitizer).
TEST_F(SkinnyStreamTest, SpanConfigMatchesReferenceAtRaggedN) {
  const Shape shapes[] = {{1, 4097, 200},  {3, 30522, 40},  {8, 1001, 77},   {13, 50257, 36},
                          {16, 333, 2049}, {16, 9, 4100},   {5, 130, 1000},  {16, 32001, 100},
                          {1, 1, 33},      {11, 7, 65}};
  uint64_t seed = 600;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      for (int sm_count : {1, 8, sm_count_, 1 << 20}) {
        ASSERT_TRUE(Run(g, kSkinnyStreamRagged, nullptr, sm_count));
        EXPECT_TRUE(g.Matches(kBudget)) << kSkinnyStreamRagged.name << " at sm_count " << sm_count;
      }
      // The registered launcher, with the scratch it asks for (the largest
      // plan above, sm_count 1 << 20, asked for at least as much).
      LaunchArgs args = g.Args(sm_count_);
      args.workspace_bytes = kSkinnyStreamRaggedLauncher.workspace_bytes(args);
      ASSERT_LE(args.workspace_bytes, workspace_bytes_) << g.problem();
      args.workspace = args.workspace_bytes > 0 ? workspace_ : nullptr;
      ASSERT_EQ(kSkinnyStreamRaggedLauncher.unsupported(args), nullptr) << g.problem();
      g.PoisonC();
      ASSERT_EQ(kSkinnyStreamRaggedLauncher.launch(args, stream_), cudaSuccess) << g.problem();
      CUDA_OK(cudaStreamSynchronize(stream_));
      EXPECT_TRUE(g.Matches(kBudget)) << "registered launcher on " << g.problem();
    }
  }
}

// Small launches for compute-sanitizer memcheck (the device script runs this
// one under it): B allocated exactly and K N % 8 = 5, 5, 5, 5, 1, so the last
// row ends inside a 16-byte chunk at the very end of the allocation, with one
// split, cluster splits and workspace splits.
TEST_F(SkinnyStreamTest, SpanConfigReadsNothingPastTheEndOfB) {
  const Shape shapes[] = {{8, 1001, 77}, {16, 333, 1025}, {1, 9, 5}, {13, 7, 3}, {3, 129, 2049}};
  uint64_t seed = 700;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      ASSERT_NE(s.k * s.n % 8, 0);
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      for (int sm_count : {sm_count_, 1 << 20}) {
        ASSERT_TRUE(Run(g, kSkinnyStreamRagged, nullptr, sm_count));
        EXPECT_TRUE(g.Matches(kBudget)) << "at sm_count " << sm_count;
      }
    }
  }
}

// The span path feeds the mma the same B elements as the default config's
// narrow copies under the same split plan: C bitwise the same (so the span
// config is as deterministic and batch invariant as the default), A aligned
// or not.
TEST_F(SkinnyStreamTest, SpanPathGivesTheDefaultConfigsBits) {
  const Shape shapes[] = {{16, 32001, 300}, {8, 30522, 768}, {1, 50257, 64}, {13, 1001, 4095}};
  uint64_t seed = 650;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      const std::vector<uint8_t> narrow = g.DownloadC();
      ASSERT_TRUE(Run(g, kSkinnyStreamRagged));
      EXPECT_TRUE(g.Matches(kBudget));
      EXPECT_TRUE(narrow == g.DownloadC()) << "span and narrow copies differ on " << g.problem();
      ASSERT_TRUE(Run(g, kSkinnyStreamRagged, g.misaligned_a()));
      EXPECT_TRUE(narrow == g.DownloadC()) << "misaligned A differs on " << g.problem();
    }
  }
}

// The span config plans like the default (the bitwise equality above rests on it).
TEST(SkinnyStreamPlanTest, SpanConfigPlansLikeTheDefault) {
  for (int64_t n : {1, 7, 1001, 30522, 32001, 50257}) {
    for (int64_t k : {1, 77, 768, 4096, 65536}) {
      for (int sms : {1, 8, 132}) {
        const SkinnyStreamPlan a = MakeSkinnyStreamPlan(n, k, sms, kSkinnyStreamDefault);
        const SkinnyStreamPlan b = MakeSkinnyStreamPlan(n, k, sms, kSkinnyStreamRagged);
        EXPECT_EQ(a.splits, b.splits) << n << " " << k << " " << sms;
        EXPECT_EQ(a.k_chunk, b.k_chunk) << n << " " << k << " " << sms;
        EXPECT_EQ(a.workspace, b.workspace) << n << " " << k << " " << sms;
      }
    }
  }
}

// The span copies, modelled on the CPU as the kernel issues them (its own
// arithmetic, skinny_spans.h): under the real split plan, each CTA computes a
// chunk at its stage 0 and moves it by 32 rows a stage, with 0 bytes for rows
// past its range, and SkinnySpanCopyOf picks the copy. A 16-byte cp.async is
// taken to read its whole 16-byte window whatever its src-size (what
// compute-sanitizer reported on the H200), element loads their bytes, a
// zero-byte copy nothing: every read is 16-byte aligned where it is a copy and
// inside B (allocated exactly). The landing row holds B[k, n] at n - n0 + d_k
// (d_k computed once per CTA at stage 0) for n < N and zero for n >= N and for
// rows past the CTA's range.
TEST(SkinnyStreamSpanTest, IssuedChunksCoverEveryStripRowExactlyAndReadOnlyInsideB) {
  constexpr int kCols = kSkinnyStreamRagged.columns;
  constexpr int kChunks = SkinnySpanChunks(kCols);
  constexpr int kRows = 32;
  ASSERT_EQ(kChunks * 8, kCols + 8);
  const Shape shapes[] = {{1, 1, 5},     {1, 7, 33},     {1, 9, 40},     {1, 130, 17},
                          {1, 333, 64},  {1, 1001, 77},  {1, 30522, 3},  {1, 32001, 9},
                          {1, 50257, 5}, {1, 129, 1},    {1, 7, 1000},   {1, 333, 1025},
                          {1, 3, 2},     {1, 129, 2049}, {1, 9, 5},      {1, 1001, 300}};
  for (const Shape& s : shapes) {
    const int64_t elements = s.k * s.n;  // B allocated exactly
    int64_t element_copies = 0;
    for (int sms : {1, 8, 132}) {
      const SkinnyStreamPlan plan = MakeSkinnyStreamPlan(s.n, s.k, sms, kSkinnyStreamRagged);
      ASSERT_EQ(plan.k_chunk % kRows, 0);
      for (int split = 0; split < plan.splits; ++split) {
        const int64_t kbeg = split * plan.k_chunk;
        const int64_t rows = std::min(s.k, kbeg + plan.k_chunk) - kbeg;
        const int64_t steps = rows > 0 ? (rows + kRows - 1) / kRows : 0;
        for (int64_t n0 = 0; n0 < s.n; n0 += kCols) {
          for (int64_t i = 0; i < steps; ++i) {
            for (int r = 0; r < kRows; ++r) {
              const int64_t k = kbeg + kRows * i + r;
              SCOPED_TRACE(::testing::Message() << "N=" << s.n << " K=" << s.k << " sms " << sms
                                                << " row " << k << " strip " << n0);
              // The landing row: element value = its offset in B + 1, 0 for zeros.
              std::vector<int64_t> landed(kChunks * 8, -1);
              for (int c = 0; c < kChunks; ++c) {
                const SkinnySpanChunk at0 = SkinnySpanChunkAt(kbeg + r, s.n, n0, c);
                const int64_t first = at0.first + kRows * i * s.n;
                const int bytes = kRows * i + r < rows ? at0.bytes : 0;
                ASSERT_EQ(first % 8, 0);
                ASSERT_GE(bytes, 0);
                ASSERT_LE(bytes, 16);
                ASSERT_EQ(bytes % 2, 0);
                int64_t read_end = 0;  // elements read: [first, read_end)
                switch (SkinnySpanCopyOf(first, bytes, elements)) {
                  case SkinnySpanCopy::kZeros:
                    ASSERT_EQ(bytes, 0);
                    break;
                  case SkinnySpanCopy::kCpAsync16:
                    read_end = first + 8;
                    break;
                  case SkinnySpanCopy::kElements:
                    ASSERT_GT(bytes, 0);
                    read_end = first + bytes / 2;
                    ++element_copies;
                    break;
                }
                if (read_end > 0) {
                  ASSERT_GE(first, 0);
                  ASSERT_LE(read_end, elements) << "chunk " << c << " reads past B's end";
                }
                for (int e = 0; e < 8; ++e) {
                  landed[c * 8 + e] = e < bytes / 2 ? first + e + 1 : 0;
                }
              }
              const int64_t d = SkinnySpanMisalignment(kbeg + r, s.n, n0);
              ASSERT_GE(d, 0);
              ASSERT_LT(d, 8);
              for (int64_t col = 0; col < kCols; ++col) {
                const int64_t at = col + d;
                ASSERT_LT(at, kChunks * 8);
                if (kRows * i + r >= rows) {
                  ASSERT_EQ(landed[at], 0) << "row past the CTA's range";
                } else if (n0 + col < s.n) {
                  ASSERT_EQ(landed[at], k * s.n + n0 + col + 1) << "column " << n0 + col;
                } else {
                  ASSERT_EQ(landed[at], 0) << "column " << n0 + col << " past N";
                }
              }
            }
          }
        }
      }
    }
    // K N % 8 != 0: the chunk holding B's last element crosses its end.
    if (elements % 8 != 0) {
      EXPECT_GT(element_copies, 0) << "N=" << s.n << " K=" << s.k;
    }
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

// The registered ragged member declines what it is not raced for, before any
// CUDA call: N % 8 == 0, more than 16 rows, a B that is not 16-byte aligned;
// and the span config is built for up to 16 rows at a ragged N.
TEST(SkinnyStreamLauncherTest, RaggedMemberDeclinesAlignedNWideMAndMisalignedB) {
  LaunchArgs args;
  args.dtype = DType::kBF16;
  args.a = args.b = reinterpret_cast<const void*>(uintptr_t{256});
  args.c = reinterpret_cast<void*>(uintptr_t{256});
  args.m = 16;
  args.n = 32001;
  args.k = 4096;
  EXPECT_EQ(kSkinnyStreamRaggedLauncher.unsupported(args), nullptr);
  args.n = 4096;
  EXPECT_NE(kSkinnyStreamRaggedLauncher.unsupported(args), nullptr);
  EXPECT_EQ(kSkinnyStreamRaggedLauncher.launch(args, nullptr), cudaErrorInvalidValue);
  args.n = 30522;
  args.m = 17;
  EXPECT_NE(kSkinnyStreamRaggedLauncher.unsupported(args), nullptr);
  EXPECT_EQ(kSkinnyStreamRaggedLauncher.launch(args, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSkinnyStream(args, kSkinnyStreamRagged, nullptr), cudaErrorInvalidValue);
  args.m = 1;
  args.b = reinterpret_cast<const void*>(uintptr_t{256 + 8});
  EXPECT_NE(kSkinnyStreamRaggedLauncher.unsupported(args), nullptr);
  EXPECT_EQ(kSkinnyStreamRaggedLauncher.launch(args, nullptr), cudaErrorInvalidValue);
  args.dtype = DType::kF32;
  args.b = args.a;
  EXPECT_NE(kSkinnyStreamRaggedLauncher.unsupported(args), nullptr);
}

}  // namespace
}  // namespace arbiter::kernels
