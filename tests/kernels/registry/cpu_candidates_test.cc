// Every CPU candidate, for every dtype it claims, against the backend's f64
// reference through the engine's oracle, on NaN-poisoned C at ragged and
// non-square shapes.
#include <cmath>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/registry/cpu_candidates.h"
#include "tests/backends/cpu/cpu_test_util.h"
#include "tests/kernels/registry/planted_candidates.h"

namespace arbiter::testing {
namespace {

const std::vector<CandidateSpec>& Candidates() {
  static const std::vector<CandidateSpec> candidates = CpuCandidates(2);
  return candidates;
}

struct Member {
  std::string candidate;
  DType dtype;
};

void PrintTo(const Member& m, std::ostream* os) { *os << m.candidate << " " << m.dtype; }

std::vector<Member> AllMembers() {
  std::vector<Member> out;
  for (const CandidateSpec& c : Candidates()) {
    for (const CandidateMember& m : c.members) out.push_back({c.name, m.contract.dtype});
  }
  return out;
}

// The members a K-skip at K = 65536 must be caught for.
std::vector<Member> F32AndF16Members() {
  std::vector<Member> out;
  for (const Member& m : AllMembers()) {
    if (m.dtype == DType::kF32 || m.dtype == DType::kF16) out.push_back(m);
  }
  return out;
}

std::string MemberName(const ::testing::TestParamInfo<Member>& info) {
  return info.param.candidate + "_" + DTypeName(info.param.dtype);
}

const CandidateMember& Lookup(const Member& m) {
  return *FindCandidate(Candidates(), m.candidate).Member(m.dtype);
}

struct Shape {
  int64_t m, n, k;
};

// Ragged and non-square: 1-element, a single row, odd sizes straddling every
// block and tile edge of cpu_blocked (6 x 16 tiles, 72 x 512 x 256 blocks), a
// single column, a long K, and one larger than a block in every dimension.
constexpr Shape kShapes[] = {{1, 1, 1},   {1, 7, 300},   {17, 33, 65},      {64, 1, 128},
                             {129, 77, 255}, {8, 8, 65536}, {300, 200, 1000}};

std::string ShapeName(const Shape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

class CpuCandidateShapeTest : public ::testing::TestWithParam<std::tuple<Member, Shape>> {};

TEST_P(CpuCandidateShapeTest, MatchesReferenceOnPoisonedOutput) {
  const auto& [member, shape] = GetParam();
  const Problem p{member.dtype, shape.m, shape.n, shape.k};
  const CandidateMember& cm = Lookup(member);
  CpuHarness harness;
  const Operands ops = RandomOperands(p, 20240 + shape.m * 7 + shape.k);
  const auto c = harness.Run(cm, ops);
  ASSERT_TRUE(c.ok()) << c.status();
  const auto ref = harness.Reference(ops);
  ASSERT_TRUE(ref.ok()) << ref.status();

  const OracleReport report = CheckOutput(p, cm.contract.accuracy, c->data(), *ref);
  EXPECT_EQ(report.nonfinite, 0) << report.detail;
  EXPECT_TRUE(report.pass) << member.candidate << " " << p << ": " << report.detail;
}

INSTANTIATE_TEST_SUITE_P(
    AllMembers, CpuCandidateShapeTest,
    ::testing::Combine(::testing::ValuesIn(AllMembers()), ::testing::ValuesIn(kShapes)),
    [](const auto& info) {
      const Member& m = std::get<0>(info.param);
      return m.candidate + "_" + DTypeName(m.dtype) + "_" + ShapeName(std::get<1>(info.param));
    });

class CpuCandidateMemberTest : public ::testing::TestWithParam<Member> {};

// Pins the axis mapping: at M != N, in both orientations, every element of C
// is written and nothing past it (C sits in a larger poisoned buffer).
TEST_P(CpuCandidateMemberTest, WritesEveryElementOfCAndNothingPastIt) {
  const Member& member = GetParam();
  const CandidateMember& cm = Lookup(member);
  CpuHarness harness;
  for (const Shape s : {Shape{5, 37, 19}, Shape{37, 5, 19}}) {
    const Problem p{member.dtype, s.m, s.n, s.k};
    const size_t count = static_cast<size_t>(s.m * s.n);
    const size_t slack = 67;
    const Operands ops = RandomOperands(p, 77);
    const auto c = harness.Run(cm, ops, count + slack);
    ASSERT_TRUE(c.ok()) << c.status();
    int64_t unwritten = 0;
    for (size_t i = 0; i < count; ++i) unwritten += std::isnan(LoadAsDouble(p.dtype, c->data(), i));
    int64_t overwritten = 0;
    for (size_t i = count; i < count + slack; ++i) {
      overwritten += !std::isnan(LoadAsDouble(p.dtype, c->data(), i));
    }
    EXPECT_EQ(unwritten, 0) << member.candidate << " " << p << " left elements of C unwritten";
    EXPECT_EQ(overwritten, 0) << member.candidate << " " << p << " wrote past the end of C";
    const auto ref = harness.Reference(ops);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const OracleReport report = CheckOutput(p, cm.contract.accuracy, c->data(), *ref);
    EXPECT_TRUE(report.pass) << member.candidate << " " << p << ": " << report.detail;
  }
}

TEST_P(CpuCandidateMemberTest, RefusesAProblemOfAnotherDType) {
  const Member& member = GetParam();
  const CandidateMember& cm = Lookup(member);
  const DType other = member.dtype == DType::kF32 ? DType::kF64 : DType::kF32;
  const Problem p{other, 2, 2, 2};
  CpuHarness harness;
  const auto c = harness.Run(cm, RandomOperands(p, 5));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
}

INSTANTIATE_TEST_SUITE_P(AllMembers, CpuCandidateMemberTest, ::testing::ValuesIn(AllMembers()),
                         MemberName);

class CpuCandidateBudgetTest : public ::testing::TestWithParam<Member> {};

// The member's budget is tight enough to catch a kernel that drops the last
// 32 values of K at K = 65536, which is what lets the oracle reject one at all.
TEST_P(CpuCandidateBudgetTest, RejectsSkippingTheLast32OfKAt65536) {
  const Member& member = GetParam();
  const CandidateMember& cm = Lookup(member);
  const CandidateSpec skip = MakePlantedSkipKCandidate();
  const Problem p{member.dtype, 8, 8, 65536};
  CpuHarness harness;
  for (uint64_t seed : {1, 2, 3}) {
    const Operands ops = RandomOperands(p, seed);
    const auto c = harness.Run(*skip.Member(p.dtype), ops);
    ASSERT_TRUE(c.ok()) << c.status();
    const auto ref = harness.Reference(ops);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const OracleReport report = CheckOutput(p, cm.contract.accuracy, c->data(), *ref);
    EXPECT_FALSE(report.pass) << member.candidate << "'s " << p.dtype
                              << " budget let a 32-value K skip through at " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(F32AndF16, CpuCandidateBudgetTest,
                         ::testing::ValuesIn(F32AndF16Members()), MemberName);

TEST(CpuCandidatesTest, ServesReferenceBlockedAndOpenBlasWithValidContracts) {
  std::vector<std::tuple<std::string, int>> names;
  for (const CandidateSpec& c : Candidates()) {
    EXPECT_TRUE(ValidateCandidate(c).ok()) << ValidateCandidate(c);
    names.emplace_back(c.name, c.tier);
    for (const CandidateMember& m : c.members) EXPECT_EQ(m.contract.arch, "cpu") << c;
  }
  EXPECT_EQ(names, (std::vector<std::tuple<std::string, int>>{
                       {"cpu_reference", 1}, {"cpu_blocked", 2}, {"openblas", 3}}));
}

TEST(CpuCandidatesTest, ClaimsOnlyWhatEachKernelDelivers) {
  const CandidateSpec& reference = FindCandidate(Candidates(), "cpu_reference");
  const CandidateSpec& blocked = FindCandidate(Candidates(), "cpu_blocked");
  const CandidateSpec& openblas = FindCandidate(Candidates(), "openblas");
  for (DType d : kAllDTypes) {
    ASSERT_NE(reference.Member(d), nullptr) << d;
    ASSERT_NE(blocked.Member(d), nullptr) << d;
    EXPECT_EQ(reference.Member(d)->contract.determinism, Determinism::kBatchInvariant);
    EXPECT_EQ(blocked.Member(d)->contract.determinism, Determinism::kBatchInvariant);
  }
  // Debian's OpenBLAS exports no cblas_sbgemm, and OpenBLAS has no f16 GEMM.
  EXPECT_EQ(openblas.Member(DType::kF16), nullptr);
  EXPECT_EQ(openblas.Member(DType::kBF16), nullptr);
  for (DType d : {DType::kF32, DType::kF64}) {
    ASSERT_NE(openblas.Member(d), nullptr) << d;
    // Its work split depends on M: run-to-run, never batch invariant.
    EXPECT_EQ(openblas.Member(d)->contract.determinism, Determinism::kRunToRun);
  }
}

}  // namespace
}  // namespace arbiter::testing
