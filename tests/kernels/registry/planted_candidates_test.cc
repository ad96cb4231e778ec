// The planted candidates fail the way the engine tests rely on: against their
// own (ordinary) contracts, through the oracle.
#include "tests/kernels/registry/planted_candidates.h"

#include <gtest/gtest.h>

#include "tests/backends/cpu/cpu_test_util.h"

namespace arbiter::testing {
namespace {

OracleReport RunAndCheck(const CandidateSpec& spec, const Problem& p, uint64_t seed) {
  CpuHarness harness;
  const Operands ops = RandomOperands(p, seed);
  const CandidateMember& member = *spec.Member(p.dtype);
  const auto c = harness.Run(member, ops);
  EXPECT_TRUE(c.ok()) << c.status();
  const auto ref = harness.Reference(ops);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (!c.ok() || !ref.ok()) return {};
  return CheckOutput(p, member.contract.accuracy, c->data(), *ref);
}

TEST(PlantedCandidatesTest, ClaimOrdinaryValidContracts) {
  for (const CandidateSpec& spec : {MakePlantedSkipKCandidate(), MakePlantedPartialCCandidate()}) {
    EXPECT_TRUE(ValidateCandidate(spec).ok()) << ValidateCandidate(spec);
    for (DType d : kAllDTypes) EXPECT_NE(spec.Member(d), nullptr) << spec << " " << d;
  }
}

TEST(PlantedCandidatesTest, SkipKDropsTheLast32OrTheLastOne) {
  EXPECT_EQ(PlantedSkippedK(65536), 32);
  EXPECT_EQ(PlantedSkippedK(33), 32);
  EXPECT_EQ(PlantedSkippedK(32), 1);
  EXPECT_EQ(PlantedSkippedK(1), 1);
}

TEST(PlantedCandidatesTest, SkipKFailsTheOracleForEveryDType) {
  const CandidateSpec spec = MakePlantedSkipKCandidate();
  for (DType d : kAllDTypes) {
    for (const Problem p : {Problem{d, 64, 64, 256}, Problem{d, 16, 16, 20}}) {
      const OracleReport report = RunAndCheck(spec, p, 8);
      EXPECT_FALSE(report.pass) << p << ": " << report.detail;
      EXPECT_EQ(report.nonfinite, 0) << p << ": it writes all of C";
      EXPECT_GT(report.out_of_budget, 0) << p;
    }
  }
}

TEST(PlantedCandidatesTest, SkipKFailsAtK65536ForF32AndF16) {
  const CandidateSpec spec = MakePlantedSkipKCandidate();
  for (DType d : {DType::kF32, DType::kF16}) {
    const Problem p{d, 8, 8, 65536};
    const OracleReport report = RunAndCheck(spec, p, 21);
    EXPECT_FALSE(report.pass) << p << ": " << report.detail;
  }
}

TEST(PlantedCandidatesTest, PartialCLeavesTheSecondHalfOfTheRowsPoisoned) {
  const CandidateSpec spec = MakePlantedPartialCCandidate();
  for (DType d : kAllDTypes) {
    for (int64_t m : {1, 7, 64}) {
      const Problem p{d, m, 13, 40};
      const OracleReport report = RunAndCheck(spec, p, 5);
      EXPECT_FALSE(report.pass) << p;
      EXPECT_EQ(report.nonfinite, (m - m / 2) * p.n) << p;
      EXPECT_EQ(report.out_of_budget, 0) << p << ": the rows it writes are right";
    }
  }
}

}  // namespace
}  // namespace arbiter::testing
