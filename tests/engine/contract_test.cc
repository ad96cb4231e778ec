#include <cmath>
#include <limits>

#include "engine/candidate.h"
#include "engine/registry.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_backend.h"

namespace arbiter {
namespace {

using testing::FakeBackend;
using testing::FakeCandidate;
using testing::TimedKernel;

CandidateSpec Valid() { return FakeCandidate("good", 2, TimedKernel(1e-6)); }

// Applies `mutate` to a valid candidate and expects registration to be refused
// with a message naming `field`.
void ExpectRefused(const std::function<void(CandidateSpec&)>& mutate, const std::string& field) {
  CandidateSpec spec = Valid();
  mutate(spec);
  const absl::Status s = ValidateCandidate(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  FakeBackend backend;
  std::vector<CandidateSpec> list;
  list.push_back(spec);
  EXPECT_FALSE(Registry::Create(std::move(list), backend).ok()) << field;
}

TEST(ContractTest, ValidCandidateIsAccepted) { EXPECT_TRUE(ValidateCandidate(Valid()).ok()); }

TEST(ContractTest, InvalidContractsAreRefusedNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  ExpectRefused([](auto& s) { s.name = ""; }, "name");
  ExpectRefused([](auto& s) { s.name = "Has Space"; }, "name");
  ExpectRefused([](auto& s) { s.version = 0; }, "version");
  ExpectRefused([](auto& s) { s.tier = 0; }, "tier");
  ExpectRefused([](auto& s) { s.tier = 4; }, "tier");
  ExpectRefused([](auto& s) { s.members.clear(); }, "members");
  ExpectRefused([](auto& s) { s.members[0].contract.accuracy.abs = 0; }, "accuracy.abs");
  ExpectRefused([](auto& s) { s.members[0].contract.accuracy.abs = -1; }, "accuracy.abs");
  ExpectRefused([=](auto& s) { s.members[0].contract.accuracy.abs = nan; }, "accuracy.abs");
  ExpectRefused([=](auto& s) { s.members[0].contract.accuracy.rel = inf; }, "accuracy.rel");
  ExpectRefused([](auto& s) { s.members[0].contract.accuracy.rel = 0; }, "accuracy.rel");
  ExpectRefused([](auto& s) { s.members[1].contract.arch = ""; }, "arch");
  ExpectRefused([](auto& s) { s.members[0].contract.shape.min_m = 0; }, "shape.min_m");
  ExpectRefused([](auto& s) { s.members[0].contract.shape.max_k = 0; }, "shape.max_k");
  ExpectRefused([](auto& s) { s.members[0].contract.shape.align_n = 0; }, "shape.align_n");
  ExpectRefused([](auto& s) { s.members[0].run = nullptr; }, "run");
  ExpectRefused([](auto& s) { s.members[0].contract.tile = {.rows = 128, .cols = 0}; }, "tile");
  ExpectRefused([](auto& s) { s.members[0].contract.tile = {.rows = -1}; }, "tile");
  ExpectRefused(
      [](auto& s) { s.members[0].contract.tile = {.rows = 64, .cols = 64, .max_split_k = 0}; },
      "tile");
  ExpectRefused([](auto& s) { s.members[1].contract.dtype = s.members[0].contract.dtype; },
                "bound twice");
}

TEST(ContractTest, FamilyMembersMustAgreeOnAllButEntryAndTolerance) {
  // Allowed to differ: entry point and accuracy.
  CandidateSpec ok = Valid();
  ok.members[1].contract.entry = "other_symbol";
  ok.members[1].contract.accuracy = {1e-2, 1e-3};
  EXPECT_TRUE(ValidateCandidate(ok).ok());
  ExpectRefused([](auto& s) { s.members[1].contract.arch = "other"; }, "disagree on arch");
  ExpectRefused([](auto& s) { s.members[1].contract.determinism = Determinism::kNondeterministic; },
                "disagree on determinism");
  ExpectRefused([](auto& s) { s.members[1].contract.shape.align_k = 8; }, "disagree on shape");
  ExpectRefused([](auto& s) { s.members[1].contract.tile = {.rows = 64, .cols = 64}; },
                "disagree on tile");
}

TEST(ContractTest, DuplicateNamesAreRefused) {
  FakeBackend backend;
  std::vector<CandidateSpec> list = {Valid(), Valid()};
  const auto r = Registry::Create(std::move(list), backend);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("registered twice"), std::string::npos);
}

TEST(ContractTest, ArchitectureMismatchStaysListedAsIneligibleWithReason) {
  FakeBackend backend;
  CandidateSpec gpu_only = Valid();
  gpu_only.name = "gpu_only";
  for (auto& m : gpu_only.members) m.contract.arch = "sm_90a";
  std::vector<CandidateSpec> list = {Valid(), gpu_only};
  auto registry = Registry::Create(std::move(list), backend);
  ASSERT_TRUE(registry.ok()) << registry.status();
  const RegisteredCandidate* c = (*registry)->Find("gpu_only");
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->device_ok);
  EXPECT_NE(c->device_reason.find("sm_90a"), std::string::npos);
  EXPECT_TRUE((*registry)->Find("good")->device_ok);
  EXPECT_FALSE((*registry)->CoverageGap(*c, Problem{DType::kF32, 4, 4, 4}).empty());
}

TEST(ContractTest, CoverageIsCheckedPerDimWithReasons) {
  ShapeCoverage s;
  s.align_k = 8;
  s.max_m = 16;
  EXPECT_EQ(CoverageGap(s, Problem{DType::kF16, 16, 3, 64}), "");
  EXPECT_EQ(CoverageGap(s, Problem{DType::kF16, 17, 3, 64}), "M=17 is above its maximum 16");
  EXPECT_EQ(CoverageGap(s, Problem{DType::kF16, 1, 3, 63}), "K=63 is not a multiple of 8");
}

TEST(ContractTest, TileEfficiencyCountsPaddedTilesAndIdleSlotsOfTheLastWave) {
  const OutputTile t128x256{.rows = 128, .cols = 256};
  // Exact at 256 rows, 47% of the second row of tiles wasted at 136.
  EXPECT_DOUBLE_EQ(TileEfficiency(t128x256, Problem{DType::kBF16, 256, 14336, 3584}, 0), 1.0);
  EXPECT_NEAR(TileEfficiency(t128x256, Problem{DType::kBF16, 136, 8192, 2048}, 0), 136.0 / 256,
              1e-12);
  // 2 x 56 = 112 tiles on 132 SMs: one wave, 20 SMs idle.
  EXPECT_NEAR(TileEfficiency(t128x256, Problem{DType::kBF16, 256, 14336, 3584}, 132), 112.0 / 132,
              1e-12);
  // 2 x 70 = 140 tiles: two waves, the second with 8 of 132 SMs busy.
  EXPECT_NEAR(TileEfficiency(t128x256, Problem{DType::kBF16, 256, 17920, 64}, 132),
              140.0 / 264, 1e-12);
  // A split tile splits K until the tiles fill a wave: 36 tiles of 64 rows, half of them
  // padding at M = 32, split 4 ways (ceil(132 / 36)) into 144 CTAs, two waves of 132.
  const OutputTile split{.rows = 64, .cols = 256, .max_split_k = 8};
  EXPECT_NEAR(TileEfficiency(split, Problem{DType::kBF16, 32, 9216, 3072}, 132), 0.5 * 144 / 264,
              1e-12);
  // Unknown: no model, no claim.
  EXPECT_EQ(TileEfficiency(OutputTile{}, Problem{DType::kBF16, 136, 8200, 2056}, 132), 1.0);
  EXPECT_EQ(TileName(split), "64x256/k8");
  EXPECT_EQ(TileName(OutputTile{}), "unknown");
}

TEST(ContractTest, ToleranceGrowsWithSqrtK) {
  const AccuracyBudget b{1e-6, 1e-5};
  const double t16 = Tolerance(b, DType::kF64, 16, 1.0, 0.0);
  const double t65536 = Tolerance(b, DType::kF64, 65536, 1.0, 0.0);
  EXPECT_NEAR((t65536 - 1e-6) / (t16 - 1e-6), 64.0, 1e-9);
}

}  // namespace
}  // namespace arbiter
