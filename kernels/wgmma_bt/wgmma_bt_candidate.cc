#include "kernels/wgmma_bt/wgmma_bt_candidate.h"

#include "kernels/common/family.h"
#include "kernels/wgmma_bt/wgmma_bt.h"

namespace arbiter::kernels {

// The contract, and why (wgmma_bt.h has the design):
// - arch sm_90a: wgmma exists only there (no PTX to JIT elsewhere);
// - N % 8 and K % 8: TMA's 16-byte row strides; operands not 16-byte aligned
//   are declined by the launcher (kWgmmaBt.unsupported); rows 17-256, where
//   the transposed orientation is meant to pay (the kernel takes any M);
// - run to run: a fixed-order K walk and rank-order split sums; not batch
//   invariant, since the token tile and the split count follow M;
// - tile unknown: the token tile (32-256 rows of C) and the strip width (64 or
//   128 columns) follow M (MakeWgmmaBtPlan).
CandidateSpec MakeWgmmaBtCandidate() {
  const ShapeCoverage rows = {
      .min_m = kWgmmaBtRacedMinM, .max_m = kWgmmaBtRacedMaxM, .align_n = 8, .align_k = 8};
  return MakeFamily({.name = "wgmma_bt", .version = 1, .tier = 3, .arch = "sm_90a", .shape = rows,
                     .determinism = Determinism::kRunToRun,
                     .members = HalfTypes({kWgmmaBtBudgetAbs, kWgmmaBtBudgetRel}),
                     .launcher = kWgmmaBt,
                     .description = "17-256 rows: C^T = B^T A^T with wgmma (weight as the 64-row "
                                    "operand, tokens as N), B streamed once by TMA, K split in "
                                    "clusters"});
}

}  // namespace arbiter::kernels
