// End to end with the engine: the Measurer, on the CPU backend, accepts every
// CPU candidate's accuracy and determinism claims and rejects the planted ones.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/measurer.h"
#include "engine/registry.h"
#include "kernels/registry/cpu_candidates.h"
#include "tests/backends/cpu/cpu_test_util.h"
#include "tests/kernels/registry/planted_candidates.h"

namespace arbiter::testing {
namespace {

TEST(CpuMeasureTest, EngineTimesEveryCpuCandidateAndRejectsThePlantedOnes) {
  CpuHarness harness;
  std::vector<CandidateSpec> specs = CpuCandidates(2);
  specs.push_back(MakePlantedSkipKCandidate());
  specs.push_back(MakePlantedPartialCCandidate());
  auto registry = Registry::Create(specs, harness.backend());
  ASSERT_TRUE(registry.ok()) << registry.status();

  MeasureOptions options;
  options.warmup_runs = 1;
  options.min_samples = 3;
  options.max_samples = 5;
  options.device_budget_seconds = 0.2;
  options.seed = 17;
  Measurer measurer(harness.backend(), harness.stream(), options);

  for (DType dtype : kAllDTypes) {
    const Problem p{dtype, 96, 80, 300};
    std::vector<const RegisteredCandidate*> covering;
    for (const RegisteredCandidate& rc : (*registry)->candidates()) {
      if ((*registry)->CoverageGap(rc, p).empty()) covering.push_back(&rc);
    }
    const auto measurements = measurer.Measure(p, covering);
    ASSERT_TRUE(measurements.ok()) << measurements.status();
    std::map<std::string, const Measurement*> by_name;
    for (const Measurement& m : *measurements) by_name[m.result.name] = &m;

    for (const char* name : {"cpu_reference", "cpu_blocked", "openblas"}) {
      if (dtype != DType::kF32 && dtype != DType::kF64 && std::string(name) == "openblas") {
        EXPECT_FALSE(by_name.count(name)) << "openblas does not cover " << p;
        continue;
      }
      ASSERT_TRUE(by_name.count(name)) << name << " not measured at " << p;
      const Measurement& m = *by_name[name];
      EXPECT_EQ(m.result.state, ResultState::kTimed) << name << " " << p << ": " << m.result.reason;
      EXPECT_FALSE(m.claim_violation) << name << " " << p << ": " << m.result.reason;
    }
    for (const char* name : {"planted_skip_k", "planted_partial_c"}) {
      ASSERT_TRUE(by_name.count(name)) << name;
      EXPECT_EQ(by_name[name]->result.state, ResultState::kFailedOracle)
          << name << " " << p << ": " << by_name[name]->result.reason;
    }
  }
}

}  // namespace
}  // namespace arbiter::testing
