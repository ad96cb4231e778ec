// cpu_blocked's micro-kernel variants, each forced in turn so a machine with
// AVX-512 also covers the AVX2 and baseline paths other hosts will take.
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_blocked/cpu_blocked.h"
#include "tests/backends/cpu/cpu_test_util.h"

namespace arbiter::testing {
namespace {

constexpr CpuIsa kForced[] = {CpuIsa::kBaseline, CpuIsa::kX86_64_V3, CpuIsa::kX86_64_V4};

std::string IsaId(CpuIsa isa) {
  std::string name = CpuIsaName(isa);
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

class CpuBlockedIsaTest : public ::testing::TestWithParam<std::tuple<CpuIsa, DType>> {
 protected:
  void SetUp() override {
    if (!CpuSupports(std::get<0>(GetParam()))) {
      GTEST_SKIP() << "this CPU lacks " << CpuIsaName(std::get<0>(GetParam()));
    }
  }
  const CandidateMember& member() {
    spec_ = MakeCpuBlockedCandidate({.threads = 2, .isa = std::get<0>(GetParam())});
    return *spec_.Member(std::get<1>(GetParam()));
  }
  CandidateSpec spec_;
};

TEST_P(CpuBlockedIsaTest, MatchesReferenceWithinTheSameBudget) {
  const DType dtype = std::get<1>(GetParam());
  const CandidateMember& cm = member();
  CpuHarness harness;
  for (const Problem p : {Problem{dtype, 1, 1, 1}, Problem{dtype, 17, 33, 65},
                          Problem{dtype, 129, 77, 255}, Problem{dtype, 8, 8, 65536}}) {
    const Operands ops = RandomOperands(p, 3);
    const auto c = harness.Run(cm, ops);
    ASSERT_TRUE(c.ok()) << c.status();
    const auto ref = harness.Reference(ops);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const OracleReport report = CheckOutput(p, cm.contract.accuracy, c->data(), *ref);
    EXPECT_TRUE(report.pass) << CpuIsaName(std::get<0>(GetParam())) << " " << p << ": "
                             << report.detail;
  }
}

TEST_P(CpuBlockedIsaTest, RowsDoNotDependOnM) {
  const DType dtype = std::get<1>(GetParam());
  const CandidateMember& cm = member();
  const Problem full{dtype, 150, 40, 300};
  CpuHarness harness;
  const Operands ops = RandomOperands(full, 8);
  const auto c_full = harness.Run(cm, ops);
  ASSERT_TRUE(c_full.ok()) << c_full.status();
  const size_t elem = ElementSize(dtype);
  for (int64_t first_row : {0, 75}) {
    for (int64_t m = 1; m <= 7; ++m) {
      Operands slice{Problem{dtype, m, full.n, full.k}, {}, ops.b};
      slice.a.assign(ops.a.begin() + first_row * full.k * elem,
                     ops.a.begin() + (first_row + m) * full.k * elem);
      const auto c = harness.Run(cm, slice);
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(std::memcmp(c->data(), c_full->data() + first_row * full.n * elem,
                            m * full.n * elem),
                0)
          << "rows " << first_row << ".." << first_row + m - 1 << " at M=" << m;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Forced, CpuBlockedIsaTest,
                         ::testing::Combine(::testing::ValuesIn(kForced),
                                            ::testing::ValuesIn(kAllDTypes)),
                         [](const auto& info) {
                           return IsaId(std::get<0>(info.param)) + "_" +
                                  DTypeName(std::get<1>(info.param));
                         });

// v3 and v4 run the same fused multiply-adds lane by lane: same bits.
TEST(CpuBlockedIsaAgreementTest, FusedVariantsAgreeBitwise) {
  if (!CpuSupports(CpuIsa::kX86_64_V4)) GTEST_SKIP() << "this CPU lacks x86-64-v4";
  const CandidateSpec v3 = MakeCpuBlockedCandidate({.threads = 2, .isa = CpuIsa::kX86_64_V3});
  const CandidateSpec v4 = MakeCpuBlockedCandidate({.threads = 2, .isa = CpuIsa::kX86_64_V4});
  CpuHarness harness;
  for (DType d : kAllDTypes) {
    const Operands ops = RandomOperands(Problem{d, 129, 77, 255}, 6);
    const auto c3 = harness.Run(*v3.Member(d), ops);
    const auto c4 = harness.Run(*v4.Member(d), ops);
    ASSERT_TRUE(c3.ok() && c4.ok()) << c3.status() << c4.status();
    EXPECT_TRUE(*c3 == *c4) << d;
  }
}

TEST(CpuBlockedIsaAgreementTest, AutoPicksTheBestSupportedVariant) {
  const CandidateSpec spec = MakeCpuBlockedCandidate({.threads = 1});
  const CpuIsa best = CpuSupports(CpuIsa::kX86_64_V4)   ? CpuIsa::kX86_64_V4
                      : CpuSupports(CpuIsa::kX86_64_V3) ? CpuIsa::kX86_64_V3
                                                        : CpuIsa::kBaseline;
  EXPECT_NE(spec.description.find(CpuIsaName(best)), std::string::npos) << spec.description;
}

}  // namespace
}  // namespace arbiter::testing
