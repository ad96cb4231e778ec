// Tests of mid_stream (label gpu for the device ones): every member (M from 1
// to 128 in 4, 8, 12 or 16 groups of 8 tokens) and every built config, ragged M
// and K, partial column strips, f16 and bf16, against an f64 reference on
// NaN-poisoned C with a guard; the launch geometry on M != N and at SM counts
// that make strips whole, shared by two CTAs or by many; K = 65536; and the
// determinism it claims (bitwise repeats, rows of C independent of M). The plan,
// refusal and contract tests need no device.

#include <algorithm>
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
#include "kernels/mid_stream/mid_stream.h"
#include "kernels/mid_stream/mid_stream_candidate.h"
#include "tests/kernels/common/device_gemm.h"

namespace arbiter::kernels {
namespace {

using testing::DeviceGemm;

constexpr AccuracyBudget kBudget = {kMidStreamBudgetAbs, kMidStreamBudgetRel};

struct Shape {
  int64_t m, n, k;
};

// Every CTA gets an equal run of units (within one), and no more CTAs than
// units; the split never depends on M (there is no M argument).
TEST(MidStreamPlanTest, EqualRunsOfUnitsOneCtaPerSlot) {
  for (const Shape& s : {Shape{0, 4096, 4096}, Shape{0, 8, 8}, Shape{0, 18176, 4544},
                         Shape{0, 264, 40}}) {
    for (int sms : {1, 7, 132}) {
      const MidStreamPlan plan = MakeMidStreamPlan(s.n, s.k, sms, 1, 256);
      EXPECT_EQ(plan.strips, (s.n + 255) / 256);
      EXPECT_EQ(plan.units_per_strip, (s.k + 31) / 32);
      EXPECT_EQ(plan.units, int64_t{plan.strips} * plan.units_per_strip);
      EXPECT_EQ(plan.ctas, std::min<int64_t>(sms, plan.units));
    }
  }
  EXPECT_EQ(MakeMidStreamPlan(4096, 4096, 132, 2, 512).ctas, 264);
}

TEST(MidStreamLauncherTest, RefusesWhatItDoesNotCover) {
  alignas(16) static uint16_t buffer[64];
  LaunchArgs args;
  args.dtype = DType::kBF16;
  args.a = buffer;
  args.b = buffer;
  args.c = buffer;
  args.m = 17;
  args.n = 64;
  args.k = 64;
  EXPECT_EQ(MidStreamUnsupportedReason(args, kMidStreamDefault), nullptr);
  LaunchArgs bad = args;
  bad.k = 60;
  EXPECT_NE(MidStreamUnsupportedReason(bad, kMidStreamDefault), nullptr);
  bad = args;
  bad.n = 30;
  EXPECT_NE(MidStreamUnsupportedReason(bad, kMidStreamDefault), nullptr);
  bad = args;
  bad.b = buffer + 1;
  EXPECT_NE(MidStreamUnsupportedReason(bad, kMidStreamDefault), nullptr);
  bad = args;
  bad.dtype = DType::kF32;
  EXPECT_NE(MidStreamUnsupportedReason(bad, kMidStreamDefault), nullptr);
  bad = args;
  bad.m = 129;
  EXPECT_NE(MidStreamUnsupportedReason(bad, kMidStreamDefault), nullptr);
  bad = args;
  bad.m = 65;  // the 512-column config holds 64 rows at most
  EXPECT_NE(MidStreamUnsupportedReason(bad, kMidStreamConfigs[2]), nullptr);
  bad = args;
  bad.m = 0;
  EXPECT_NE(MidStreamUnsupportedReason(bad, kMidStreamDefault), nullptr);
  EXPECT_EQ(LaunchMidStream(bad, kMidStreamDefault, nullptr), cudaErrorInvalidValue);
}

// The contract the candidate declares, and misaligned operands declined
// (UNIMPLEMENTED, naming why) before any launch or stream use.
TEST(MidStreamCandidateTest, DeclaresItsContractAndDeclinesMisalignedOperands) {
  const CandidateSpec spec = MakeMidStreamCandidate();
  ASSERT_EQ(spec.members.size(), 2u);
  for (const CandidateMember& member : spec.members) {
    EXPECT_EQ(member.contract.arch, "sm_90+");
    EXPECT_EQ(member.contract.determinism, Determinism::kBatchInvariant);
    EXPECT_EQ(member.contract.shape.min_m, kMidStreamRacedMinM);
    EXPECT_EQ(member.contract.shape.max_m, kMidStreamRacedMaxM);
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

class MidStreamTest : public testing::Sm90StreamTest {
 protected:
  void TearDown() override {
    Sm90StreamTest::TearDown();
    if (workspace_ != nullptr) cudaFree(workspace_);
  }

  // Poisons C (and the workspace: a slot read before it is written shows),
  // launches `config` planning for `sm_count` multiprocessors (default the
  // device's) and waits.
  ::testing::AssertionResult Run(DeviceGemm& g,
                                 const MidStreamConfig& config = kMidStreamDefault,
                                 int sm_count = 0) {
    g.PoisonC();
    LaunchArgs args = g.Args(sm_count != 0 ? sm_count : sm_count_);
    args.workspace_bytes = MidStreamWorkspaceBytes(args, config);
    if (args.workspace_bytes == 0) {
      return ::testing::AssertionFailure() << "no workspace size for " << g.problem();
    }
    if (args.workspace_bytes > workspace_bytes_) {
      CUDA_OK(cudaFree(workspace_));
      CUDA_OK(cudaMalloc(&workspace_, args.workspace_bytes));
      workspace_bytes_ = args.workspace_bytes;
    }
    CUDA_OK(cudaMemsetAsync(workspace_, 0xff, workspace_bytes_, stream_));
    args.workspace = workspace_;
    const cudaError_t err = LaunchMidStream(args, config, stream_);
    if (err != cudaSuccess) {
      return ::testing::AssertionFailure() << "LaunchMidStream(" << config.name << ") on "
                                           << g.problem() << ": " << cudaGetErrorName(err);
    }
    CUDA_OK(cudaStreamSynchronize(stream_));
    return ::testing::AssertionSuccess();
  }

  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// Every member at ragged M (17, 33, 65, 100, 128; 1 and 24 too), M != N, K not
// a multiple of the 32-row unit, N not a multiple of the 256-column strip, both
// dtypes, every built config: every element of C written and within budget.
TEST_F(MidStreamTest, MatchesReferenceOnRaggedShapes) {
  const Shape shapes[] = {{17, 4104, 1000}, {33, 200, 4104}, {65, 1032, 520}, {100, 328, 2056},
                          {128, 4096, 1032}, {1, 72, 136},   {24, 18176, 72}, {96, 3072, 8}};
  uint64_t seed = 1;
  for (const MidStreamConfig& config : kMidStreamConfigs) {
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      for (const Shape& s : shapes) {
        if (config.columns == 512 && s.m > 64) continue;
        DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
        ASSERT_TRUE(Run(g, config));
        EXPECT_TRUE(g.Matches(kBudget)) << config.name;
      }
    }
  }
}

// The launch geometry: M > N and M < N, at SM counts where every CTA owns
// whole strips (1, 3), where strips are shared by two or three CTAs, and where
// a strip is shared by dozens (one strip, 132 and 500 CTAs): a swapped axis, a
// wrong slot or a wrong owner leaves NaN (the workspace is poisoned) or a
// wrong sum.
TEST_F(MidStreamTest, LaunchGeometryAtEveryShareOfAStrip) {
  const Shape shapes[] = {{40, 8, 1000}, {17, 392, 4104}, {128, 64, 600}, {100, 1288, 3000}};
  uint64_t seed = 100;
  for (const Shape& s : shapes) {
    DeviceGemm g(Problem{DType::kBF16, s.m, s.n, s.k}, seed++);
    for (int sms : {1, 3, 5, 11, 132, 500}) {
      ASSERT_TRUE(Run(g, kMidStreamDefault, sms));
      EXPECT_TRUE(g.Matches(kBudget)) << sms << " SMs";
    }
  }
}

// The accuracy claim at the longest K the contract names.
TEST_F(MidStreamTest, WithinBudgetAtK65536) {
  uint64_t seed = 200;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    DeviceGemm g(Problem{dtype, 17, 128, 65536}, seed++);
    ASSERT_TRUE(Run(g));
    EXPECT_TRUE(g.Matches(kBudget));
  }
}

// run_to_run: the same launch twice gives the same bytes, whichever CTA
// arrives last at a shared strip.
TEST_F(MidStreamTest, RepeatsBitwise) {
  uint64_t seed = 300;
  for (const Shape& s : {Shape{64, 4096, 4096}, Shape{96, 3072, 8192}, Shape{33, 8, 65536}}) {
    DeviceGemm g(Problem{DType::kF16, s.m, s.n, s.k}, seed++);
    ASSERT_TRUE(Run(g));
    const std::vector<uint8_t> first = g.DownloadC();
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(first == g.DownloadC()) << "differs between runs on " << g.problem();
    }
  }
}

// The batch_invariant claim: the first m rows of C are bitwise the same at
// M = m as inside M = 128, across every member M selects.
TEST_F(MidStreamTest, RowsDoNotDependOnM) {
  uint64_t seed = 400;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const Shape& base_shape : {Shape{128, 1000, 1000}, Shape{128, 4096, 520}}) {
      DeviceGemm base(Problem{dtype, base_shape.m, base_shape.n, base_shape.k}, seed++);
      ASSERT_TRUE(Run(base));
      const std::vector<uint8_t> all = base.DownloadC();
      for (int64_t m : {1, 17, 32, 33, 64, 65, 96, 97, 127}) {
        DeviceGemm part(base, m);
        ASSERT_TRUE(Run(part));
        const std::vector<uint8_t> rows = part.DownloadC();
        EXPECT_TRUE(std::equal(rows.begin(), rows.end(), all.begin()))
            << "the first " << m << " rows of C differ between M=" << m << " and M=128 ("
            << DTypeName(dtype) << ", N=" << base_shape.n << ")";
      }
    }
  }
}

}  // namespace
}  // namespace arbiter::kernels
