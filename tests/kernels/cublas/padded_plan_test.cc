// PlanPadded (kernels/cublas/padded_plan.h) with no device: the scratch
// cublas_padded asks for covers every copy it makes, copies never overlap and
// start 16-byte aligned, and A and C are copied only when their leading dim is
// ragged.
#include "kernels/cublas/padded_plan.h"

#include <cstdint>
#include <ostream>

#include <gtest/gtest.h>

namespace arbiter::cublas {
namespace {

struct Case {
  DType dtype;
  int64_t m, n, k;
};

// Ragged N, ragged K, both, odd M, f32 (4-element rows), aligned.
const Case kCases[] = {
    {DType::kF16, 512, 30522, 768}, {DType::kBF16, 64, 256, 1001}, {DType::kBF16, 4095, 4095, 4095},
    {DType::kF16, 2047, 4095, 1023}, {DType::kF16, 1, 1, 1},       {DType::kF32, 33, 1002, 250},
    {DType::kF32, 7, 1000, 996},     {DType::kBF16, 8, 50257, 1024}, {DType::kF16, 128, 256, 512},
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.m << "x" << c.n << "x" << c.k << " " << DTypeName(c.dtype);
}

int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

class PaddedPlanTest : public ::testing::TestWithParam<Case> {};

TEST_P(PaddedPlanTest, DeclaredScratchCoversEveryCopyWithoutOverlap) {
  const Case& c = GetParam();
  const Problem p{c.dtype, c.m, c.n, c.k};
  const PaddedPlan plan = PlanPadded(p);
  const size_t es = ElementSize(c.dtype);
  const int64_t align = 16 / static_cast<int64_t>(es);
  EXPECT_EQ(plan.kp, RoundUp(c.k, align));
  EXPECT_EQ(plan.np, RoundUp(c.n, align));
  if (plan.aligned()) {
    EXPECT_EQ(plan.scratch_bytes, 0u);
    EXPECT_EQ(plan.gemm_k, c.k);
    return;
  }
  // What each copy writes, from the shapes alone (not from the plan's own sums).
  const size_t a_written = plan.copy_a ? static_cast<size_t>(c.m * plan.kp) * es : 0;
  const size_t b_written = plan.copy_b ? static_cast<size_t>(plan.b_rows * plan.np) * es : 0;
  const size_t c_written = plan.copy_c ? static_cast<size_t>(c.m * plan.np) * es : 0;
  EXPECT_EQ(plan.a_bytes, a_written);
  EXPECT_EQ(plan.b_bytes, b_written);
  EXPECT_EQ(plan.c_bytes, c_written);
  // Every copy starts 16-byte aligned (the pad kernel's stores, cuBLAS's loads)
  // and ends before the next one starts, and the last inside the scratch asked for.
  for (size_t offset : {plan.a_offset, plan.b_offset, plan.c_offset}) EXPECT_EQ(offset % 256, 0u);
  EXPECT_LE(plan.a_offset + a_written, plan.b_offset);
  EXPECT_LE(plan.b_offset + b_written, plan.c_offset);
  EXPECT_LE(plan.c_offset + c_written, plan.scratch_bytes);
  // No more than the copies and their 256-byte alignment.
  EXPECT_LT(plan.scratch_bytes, a_written + b_written + c_written + 3 * 256);
  // The GEMM never reads a row of B's copy that is not there.
  EXPECT_LE(plan.gemm_k, plan.b_rows);
}

TEST_P(PaddedPlanTest, CopiesARaggedLeadingDimAndPadsKWithZeroRowsOfB) {
  const Case& c = GetParam();
  const Problem p{c.dtype, c.m, c.n, c.k};
  const PaddedPlan plan = PlanPadded(p);
  const bool ragged_k = plan.kp != c.k, ragged_n = plan.np != c.n;
  EXPECT_EQ(plan.aligned(), !ragged_k && !ragged_n);
  if (plan.aligned()) return;
  EXPECT_EQ(plan.copy_a, ragged_k);
  EXPECT_TRUE(plan.copy_b);
  EXPECT_EQ(plan.b_rows, plan.kp);  // zero rows: A's zero columns meet zeros, never NaN
  EXPECT_EQ(plan.gemm_k, plan.kp);
  EXPECT_EQ(plan.copy_c, ragged_n);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PaddedPlanTest, ::testing::ValuesIn(kCases));

TEST(PaddedPlanTest, RaggedVocabularyCopiesBAndCOnly) {
  // 512x30522x768 f16 (the public list's ragged vocabulary): K aligned, so A
  // is read in place; B goes to 768 x 30528 and C comes back from 512 x 30528.
  const PaddedPlan plan = PlanPadded(Problem{DType::kF16, 512, 30522, 768});
  EXPECT_FALSE(plan.copy_a);
  EXPECT_EQ(plan.scratch_bytes, 768u * 30528 * 2 + 512u * 30528 * 2);
}

}  // namespace
}  // namespace arbiter::cublas
