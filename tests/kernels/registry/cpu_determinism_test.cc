// The determinism claims of the CPU candidates, checked the way the engine
// checks them: run again on the same inputs (run_to_run), and compute rows at a
// smaller M (batch_invariant). cpu_blocked also promises the thread count
// changes no bit.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_blocked/cpu_blocked.h"
#include "kernels/registry/cpu_candidates.h"
#include "tests/backends/cpu/cpu_test_util.h"

namespace arbiter::testing {
namespace {

const std::vector<CandidateSpec>& Candidates() {
  static const std::vector<CandidateSpec> candidates = CpuCandidates(2);
  return candidates;
}

struct Claim {
  std::string candidate;
  DType dtype;
};

void PrintTo(const Claim& m, std::ostream* os) { *os << m.candidate << " " << m.dtype; }

std::vector<Claim> Claims(Determinism at_least) {
  std::vector<Claim> out;
  for (const CandidateSpec& c : Candidates()) {
    for (const CandidateMember& m : c.members) {
      if (m.contract.determinism >= at_least) out.push_back({c.name, m.contract.dtype});
    }
  }
  return out;
}

const CandidateMember& Lookup(const Claim& c) {
  return *FindCandidate(Candidates(), c.candidate).Member(c.dtype);
}

std::string ClaimName(const ::testing::TestParamInfo<Claim>& info) {
  return info.param.candidate + "_" + DTypeName(info.param.dtype);
}

// Rows [row, row + m) of `ops`' A, with the same B.
Operands RowSlice(const Operands& ops, int64_t row, int64_t m) {
  const Problem& p = ops.problem;
  Operands out{Problem{p.dtype, m, p.n, p.k}, {}, ops.b};
  const size_t row_bytes = static_cast<size_t>(p.k) * ElementSize(p.dtype);
  out.a.assign(ops.a.begin() + row * row_bytes, ops.a.begin() + (row + m) * row_bytes);
  return out;
}

class RunToRunTest : public ::testing::TestWithParam<Claim> {};

TEST_P(RunToRunTest, SecondRunIsBitwiseIdentical) {
  const CandidateMember& member = Lookup(GetParam());
  CpuHarness harness;
  for (const Problem p : {Problem{GetParam().dtype, 129, 77, 255},
                          Problem{GetParam().dtype, 300, 200, 1000}}) {
    const Operands ops = RandomOperands(p, 99);
    const auto first = harness.Run(member, ops);
    const auto second = harness.Run(member, ops);
    ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
    EXPECT_TRUE(*first == *second) << GetParam().candidate << " " << p << " differs between runs";
  }
}

INSTANTIATE_TEST_SUITE_P(Claimed, RunToRunTest,
                         ::testing::ValuesIn(Claims(Determinism::kRunToRun)), ClaimName);

class BatchInvariantTest : public ::testing::TestWithParam<Claim> {};

// Rows computed at M = 200 equal the same rows computed alone at M = 1..7,
// taken from the top, from inside an M block and from across a block edge.
TEST_P(BatchInvariantTest, RowsDoNotDependOnM) {
  const CandidateMember& member = Lookup(GetParam());
  const Problem full{GetParam().dtype, 200, 77, 600};
  CpuHarness harness;
  const Operands ops = RandomOperands(full, 4242);
  const auto c_full = harness.Run(member, ops);
  ASSERT_TRUE(c_full.ok()) << c_full.status();
  const size_t row_bytes = static_cast<size_t>(full.n) * ElementSize(full.dtype);
  for (int64_t first_row : {0, 70, 193}) {
    for (int64_t m = 1; m <= 7 && first_row + m <= full.m; ++m) {
      const Operands slice = RowSlice(ops, first_row, m);
      const auto c = harness.Run(member, slice);
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(std::memcmp(c->data(), c_full->data() + first_row * row_bytes, m * row_bytes), 0)
          << GetParam().candidate << ": rows " << first_row << ".." << first_row + m - 1
          << " at M=" << m << " differ from the same rows at M=" << full.m;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Claimed, BatchInvariantTest,
                         ::testing::ValuesIn(Claims(Determinism::kBatchInvariant)), ClaimName);

TEST(CpuBlockedTest, ThreadCountChangesNoBit) {
  const CandidateSpec one = MakeCpuBlockedCandidate({.threads = 1});
  const CandidateSpec three = MakeCpuBlockedCandidate({.threads = 3});
  CpuHarness harness;
  for (DType d : kAllDTypes) {
    const Operands ops = RandomOperands(Problem{d, 300, 600, 300}, 11);
    const auto c1 = harness.Run(*one.Member(d), ops);
    const auto c3 = harness.Run(*three.Member(d), ops);
    ASSERT_TRUE(c1.ok() && c3.ok()) << c1.status() << c3.status();
    EXPECT_TRUE(*c1 == *c3) << d << ": 1 and 3 threads give different bits";
  }
}

TEST(CpuDeterminismTest, EveryCandidateClaimsAtLeastRunToRun) {
  // cpu_reference and cpu_blocked claim batch_invariant, openblas run_to_run;
  // the suites above then cover every member.
  size_t members = 0;
  for (const CandidateSpec& c : Candidates()) members += c.members.size();
  EXPECT_EQ(Claims(Determinism::kRunToRun).size(), members);
}

}  // namespace
}  // namespace arbiter::testing
