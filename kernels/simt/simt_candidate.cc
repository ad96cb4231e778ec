#include "kernels/simt/simt_candidate.h"

#include "kernels/common/family.h"
#include "kernels/simt/simt.h"

namespace arbiter::kernels {

CandidateSpec MakeSimtCandidate() {
  // f32 accumulation for f32, f16 and bf16; f64 for f64.
  const AccuracyBudget f32_acc = {kSimtBudgetAbs, kSimtBudgetRel};
  const AccuracyBudget f64_acc = {kSimtF64BudgetAbs, kSimtF64BudgetRel};
  return MakeFamily({
      .name = "simt",
      .tier = 1,
      // 64 x 64 tiles, 256-thread blocks (simt.cu); 4 resident per SM assumed
      // (registers decide, not pinned by a test).
      .tile = {.rows = 64, .cols = 64, .ctas_per_sm = 4},
      .determinism = Determinism::kBatchInvariant,
      .members = {{DType::kF32, f32_acc},
                  {DType::kF64, f64_acc},
                  {DType::kF16, f32_acc},
                  {DType::kBF16, f32_acc}},
      .launcher = kSimt,
      .description = "generic 64x64 shared-memory tiled FMA kernel, any arch the build targets",
  });
}

}  // namespace arbiter::kernels
