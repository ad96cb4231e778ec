#include "engine/oracle.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "engine/measurer.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_backend.h"

namespace arbiter {
namespace {

using testing::FakeStream;
using testing::NaiveGemm;

struct Output {
  std::vector<uint8_t> c;
  std::vector<double> ref;
};

// Runs the naive kernel (optionally with a planted bug) on random operands, C poisoned first.
Output RunNaive(const Problem& p, int64_t k_used, int64_t rows_written) {
  std::vector<uint8_t> a(p.a_bytes()), b(p.b_bytes());
  Output out;
  out.c.resize(p.c_bytes());
  FillRandom(p.dtype, a.data(), p.m * p.k, 1);
  FillRandom(p.dtype, b.data(), p.k * p.n, 2);
  FillNaN(p.dtype, out.c.data(), p.m * p.n);
  FakeStream stream;
  NaiveGemm(GemmArgs{p, a.data(), b.data(), out.c.data(), &stream}, k_used, rows_written);
  testing::FakeBuffer ab(a.size()), bb(b.size());
  std::memcpy(ab.data(), a.data(), a.size());
  std::memcpy(bb.data(), b.data(), b.size());
  EXPECT_TRUE(stream.Reference(p, ab, bb, &out.ref).ok());
  return out;
}

const AccuracyBudget kBudget{1e-5, 1e-6};

class OracleKTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(OracleKTest, CorrectKernelPassesAndSkippedKBlockFails) {
  const auto [dtype, k] = GetParam();
  const Problem p{dtype, 5, 3, k};
  const Output good = RunNaive(p, k, p.m);
  const OracleReport ok = CheckOutput(p, kBudget, good.c.data(), good.ref);
  EXPECT_TRUE(ok.pass) << p << ": " << ok.detail;

  // A tiled kernel that forgets the last 32-wide K block (or the last element when K <= 32).
  const int64_t skip = k > 32 ? 32 : 1;
  const Output bad = RunNaive(p, k - skip, p.m);
  const OracleReport rejected = CheckOutput(p, kBudget, bad.c.data(), bad.ref);
  EXPECT_FALSE(rejected.pass) << p << ": max rel " << rejected.max_rel_error;
  EXPECT_GT(rejected.out_of_budget, 0);
}

INSTANTIATE_TEST_SUITE_P(KFrom16To65536, OracleKTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF64, DType::kF16,
                                                              DType::kBF16),
                                            ::testing::Values(16, 256, 4096, 65536)));

TEST(OracleTest, PartiallyWrittenOutputFailsOnPoison) {
  const Problem p{DType::kF32, 9, 7, 33};
  const Output bad = RunNaive(p, p.k, p.m / 2);
  const OracleReport r = CheckOutput(p, kBudget, bad.c.data(), bad.ref);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.nonfinite, (p.m - p.m / 2) * p.n);
  EXPECT_NE(r.detail.find("unwritten"), std::string::npos) << r.detail;
}

TEST(OracleTest, NanOrInfNeverPasses) {
  const Problem p{DType::kF32, 4, 4, 8};
  for (float poison : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Output out = RunNaive(p, p.k, p.m);
    reinterpret_cast<float*>(out.c.data())[5] = poison;
    // Even a budget that would accept anything finite must reject it.
    const OracleReport r = CheckOutput(p, AccuracyBudget{1e30, 1e30}, out.c.data(), out.ref);
    EXPECT_FALSE(r.pass);
    EXPECT_EQ(r.nonfinite, 1);
  }
}

TEST(OracleTest, ReportsMaxAbsoluteAndRelativeError) {
  const Problem p{DType::kF64, 2, 2, 4};
  Output out = RunNaive(p, p.k, p.m);
  double* c = reinterpret_cast<double*>(out.c.data());
  c[3] = out.ref[3] + 0.5;
  const OracleReport r = CheckOutput(p, AccuracyBudget{1.0, 1.0}, out.c.data(), out.ref);
  EXPECT_NEAR(r.max_abs_error, 0.5, 1e-12);
  double max_ref = 0;
  for (double v : out.ref) max_ref = std::max(max_ref, std::abs(v));
  EXPECT_NEAR(r.max_rel_error, 0.5 / max_ref, 1e-12);
}

TEST(OracleTest, SampledRowsKeepTheEdgesWhereRaggedTilesGoWrong) {
  EXPECT_EQ(SampledRows(5, 64).size(), 5u);  // few rows: all of them
  const int64_t m = 1000;                    // 1000 = 3*256 + 232: every tile size is ragged
  const std::vector<int64_t> rows = SampledRows(m, 64);
  ASSERT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  EXPECT_EQ(std::adjacent_find(rows.begin(), rows.end()), rows.end()) << "a row listed twice";
  EXPECT_LT(rows.size(), 120u);
  auto has = [&](int64_t r) { return std::binary_search(rows.begin(), rows.end(), r); };
  for (int64_t r : {int64_t{0}, int64_t{1}, m - 2, m - 1}) EXPECT_TRUE(has(r)) << r;
  for (int64_t tile = 8; tile <= 256; tile *= 2) {
    const int64_t partial = (m - 1) / tile * tile;  // first row of the last, partial tile
    EXPECT_TRUE(has(partial)) << "tile " << tile;
    EXPECT_TRUE(has(partial - 1)) << "tile " << tile;
  }
  std::set<int64_t> offsets;  // within a 16-row tile: not always the same one
  for (int64_t r : rows) offsets.insert(r % 16);
  EXPECT_GT(offsets.size(), 8u);
}

TEST(OracleTest, CheckRowsNamesAWrongElementByItsRowInC) {
  const Problem p{DType::kF32, 6, 4, 8};
  Output out = RunNaive(p, p.k, p.m);
  const std::vector<int64_t> rows = {5, 2};
  std::vector<float> packed;
  std::vector<double> ref;
  for (int64_t r : rows) {
    for (int64_t j = 0; j < p.n; ++j) {
      packed.push_back(reinterpret_cast<float*>(out.c.data())[r * p.n + j]);
      ref.push_back(out.ref[r * p.n + j]);
    }
  }
  EXPECT_TRUE(CheckRows(p, AccuracyBudget{1e-5, 1e-5}, packed.data(), ref, rows).pass);
  packed[p.n + 3] += 1.0f;  // row 2 of C, column 3
  const OracleReport r = CheckRows(p, AccuracyBudget{1e-5, 1e-5}, packed.data(), ref, rows);
  EXPECT_FALSE(r.pass);
  EXPECT_NE(r.detail.find("C[2,3]"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("2 of 6 rows checked"), std::string::npos) << r.detail;
}

// A check large enough to be split across threads reports what one pass would:
// every failure counted, the largest error, and the first failing element in
// row-major order, wherever the parts begin.
TEST(OracleTest, ALargeCheckNamesTheFirstFailingElementAndCountsThemAll) {
  const Problem p{DType::kF32, 1024, 600, 64};  // 614400 elements: several parts
  std::vector<double> ref(static_cast<size_t>(p.m * p.n));
  std::vector<float> c(ref.size());
  std::vector<uint8_t> noise(ref.size() * sizeof(float));
  FillRandom(DType::kF32, noise.data(), ref.size(), 5);
  for (size_t i = 0; i < ref.size(); ++i) {
    ref[i] = reinterpret_cast<const float*>(noise.data())[i];
    c[i] = static_cast<float>(ref[i]);
  }
  const AccuracyBudget budget{1e-5, 1e-5};
  ASSERT_TRUE(CheckOutput(p, budget, c.data(), ref).pass);

  auto at = [&](int64_t row, int64_t col) -> float& { return c[row * p.n + col]; };
  at(900, 5) += 3.0f;
  at(700, 2) = std::numeric_limits<float>::quiet_NaN();
  at(300, 7) += 1.0f;
  OracleReport r = CheckOutput(p, budget, c.data(), ref);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.nonfinite, 1);
  EXPECT_EQ(r.out_of_budget, 2);
  EXPECT_NEAR(r.max_abs_error, 3.0, 1e-3);
  EXPECT_NE(r.detail.find("first: C[300,7]"), std::string::npos) << r.detail;

  at(300, 7) = static_cast<float>(ref[300 * p.n + 7]);
  r = CheckOutput(p, budget, c.data(), ref);
  EXPECT_EQ(r.out_of_budget, 1);
  EXPECT_NE(r.detail.find("first: C[700,2] = nan (unwritten or non-finite)"), std::string::npos)
      << r.detail;
}

// The measurer's operands: random, never zero, spread like N(0, 0.5^2), in every dtype.
TEST(OperandFillTest, ValuesAreNonZeroFiniteAndSpreadLikeTheNormal) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
    const size_t count = 1 << 17;
    std::vector<uint8_t> x(count * ElementSize(dtype));
    FillRandom(dtype, x.data(), count, 7);
    double sum = 0, sum_sq = 0;
    int64_t negative = 0;
    std::set<double> distinct;
    for (size_t i = 0; i < count; ++i) {
      const double v = LoadAsDouble(dtype, x.data(), i);
      ASSERT_TRUE(std::isfinite(v)) << DTypeName(dtype) << " element " << i;
      ASSERT_NE(v, 0.0) << DTypeName(dtype) << " element " << i;
      sum += v;
      sum_sq += v * v;
      negative += v < 0;
      distinct.insert(v);
    }
    const double mean = sum / count;
    const double sd = std::sqrt(sum_sq / count - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.01) << DTypeName(dtype);
    EXPECT_NEAR(sd, 0.5, 0.01) << DTypeName(dtype);
    EXPECT_NEAR(static_cast<double>(negative) / count, 0.5, 0.01) << DTypeName(dtype);
    // Rounded to 16 bits there are few values near the mean; in f32/f64 almost none repeat.
    EXPECT_GT(distinct.size(), dtype == DType::kF32 || dtype == DType::kF64 ? 60000u : 1000u)
        << DTypeName(dtype);
  }
}

TEST(OperandFillTest, ALongFillSplitAcrossThreadsGivesTheSameValuesAsAShortOne) {
  // Long enough to be split across threads; the prefix is filled by one thread alone.
  const size_t count = size_t{1} << 23, prefix = size_t{1} << 16;
  std::vector<uint16_t> whole(count), again(count), head(prefix);
  FillRandom(DType::kBF16, whole.data(), count, 11);
  FillRandom(DType::kBF16, again.data(), count, 11);
  FillRandom(DType::kBF16, head.data(), prefix, 11);
  EXPECT_TRUE(whole == again) << "the same seed gave different operands";
  EXPECT_TRUE(std::equal(head.begin(), head.end(), whole.begin()));
  // The far end is random too: not a repeat of the beginning.
  EXPECT_FALSE(std::equal(head.begin(), head.end(), whole.end() - prefix));
}

TEST(OperandFillTest, AnotherSeedGivesOtherOperands) {
  std::vector<float> x(1000), y(1000);
  FillRandom(DType::kF32, x.data(), x.size(), 1);
  FillRandom(DType::kF32, y.data(), y.size(), 2);
  size_t same = 0;
  for (size_t i = 0; i < x.size(); ++i) same += x[i] == y[i];
  EXPECT_LT(same, 10u);
}

}  // namespace
}  // namespace arbiter
