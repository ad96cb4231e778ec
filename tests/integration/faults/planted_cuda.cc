// The planted CUDA candidates of arbiterd_faults (planted.h): planted_oob, an
// out-of-bounds write on the GPU at its trigger shape, simt elsewhere.
#include <vector>

#include "kernels/common/family.h"
#include "kernels/simt/simt.h"
#include "tests/integration/faults/planted.h"

namespace arbiter {
namespace testing {
extern const kernels::Launcher kPlantedOob;  // planted_cuda.cu
}  // namespace testing

std::vector<CandidateSpec> PlantedCudaCandidates() {
  return {kernels::MakeFamily({
      .name = "planted_oob",
      .tier = 1,
      .determinism = Determinism::kBatchInvariant,
      .members = {{DType::kF32, {kernels::kSimtBudgetAbs, kernels::kSimtBudgetRel}}},
      .launcher = testing::kPlantedOob,
      .description = "planted fault (test daemon only): writes 1 TiB past C at M=133, simt elsewhere",
  })};
}

}  // namespace arbiter
