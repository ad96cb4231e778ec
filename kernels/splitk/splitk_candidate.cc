#include "kernels/splitk/splitk_candidate.h"

#include "kernels/common/family.h"
#include "kernels/splitk/splitk.h"

namespace arbiter::kernels {
namespace {

CandidateSpec MakeVariant(bool atomic) {
  return MakeFamily({
      .name = atomic ? "splitk_atomic" : "splitk",
      .tier = 2,
      // 64 x 64 tiles where min(M, N) >= 64 (32 x 32 below, which this does not
      // follow), K split to fill 4 CTAs per SM (at most K / 256 splits: not
      // followed either).
      .tile = {.rows = 64, .cols = 64, .max_split_k = 65535, .ctas_per_sm = 4},
      .determinism = atomic ? Determinism::kNondeterministic : Determinism::kRunToRun,
      .members = HalfTypes({kSplitKBudgetAbs, kSplitKBudgetRel}),
      .launcher = atomic ? kSplitKAtomic : kSplitK,
      .description = atomic ? "K split across CTAs, f32 atomicAdd into scratch (nondeterministic)"
                            : "K split across CTAs, partials reduced in split order (sm_80+)",
  });
}

}  // namespace

std::vector<CandidateSpec> MakeSplitkCandidate() { return {MakeVariant(false), MakeVariant(true)}; }

}  // namespace arbiter::kernels
