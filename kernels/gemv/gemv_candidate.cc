#include "kernels/gemv/gemv_candidate.h"

#include "kernels/common/family.h"
#include "kernels/gemv/gemv.h"

namespace arbiter::kernels {

CandidateSpec MakeGemvCandidate() {
  return MakeFamily({
      .name = "gemv",
      .tier = 2,
      .shape = {.max_m = kGemvMaxM},
      .determinism = Determinism::kBatchInvariant,
      .members = HalfTypes({kGemvBudgetAbs, kGemvBudgetRel}),
      .launcher = kGemv,
      .description = "M <= 16: streams B once with 16-byte loads, f32 FMA",
  });
}

}  // namespace arbiter::kernels
