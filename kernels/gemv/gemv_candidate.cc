#include "kernels/gemv/gemv_candidate.h"

#include "kernels/common/family.h"
#include "kernels/gemv/gemv.h"

namespace arbiter::kernels {

CandidateSpec MakeGemvCandidate() {
  return MakeFamily({
      .name = "gemv",
      .tier = 2,
      .shape = {.max_m = kGemvMaxM},
      // A block streams 32 columns of B for every row of C (no padded rows);
      // K split to fill 4 blocks per SM when the columns alone leave SMs idle.
      .tile = {.rows = 1, .cols = 32, .max_split_k = 65535, .ctas_per_sm = 4},
      .determinism = Determinism::kBatchInvariant,
      .members = HalfTypes({kGemvBudgetAbs, kGemvBudgetRel}),
      .launcher = kGemv,
      .description = "M <= 16: streams B once with 16-byte loads, f32 FMA",
  });
}

}  // namespace arbiter::kernels
