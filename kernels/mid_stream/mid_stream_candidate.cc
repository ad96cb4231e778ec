#include "kernels/mid_stream/mid_stream_candidate.h"

#include "kernels/common/family.h"
#include "kernels/mid_stream/mid_stream.h"

namespace arbiter::kernels {

// The contract, and why (mid_stream.h has the design):
// - arch sm_90+: the geometry (one CTA an SM, the ring depth) was picked on
//   the H200; the instructions are sm_80 mma.sync and cp.async;
// - N % 8 and K % 8: every copy is 16 bytes; misaligned operands are declined
//   by the launcher; rows 17-128 (below, skinny streams B);
// - batch invariant: fixed-order sums, and the unit split follows N, K and the
//   SM count, never M;
// - tile: 256 columns of C for all M rows (8-token groups) a CTA, K split over CTAs by equal
//   runs of units (up to K / 32 splits), one CTA an SM.
CandidateSpec MakeMidStreamCandidate() {
  return MakeFamily({.name = "mid_stream", .version = 1, .tier = 2, .arch = "sm_90+",
                     .shape = {.min_m = kMidStreamRacedMinM, .max_m = kMidStreamRacedMaxM,
                               .align_n = 8, .align_k = 8},
                     .tile = {.rows = 8, .cols = kMidStreamDefault.columns,
                              .max_split_k = 2048, .ctas_per_sm = 1},
                     .determinism = Determinism::kBatchInvariant,
                     .members = HalfTypes({kMidStreamBudgetAbs, kMidStreamBudgetRel}),
                     .launcher = kMidStream,
                     .description = "17-128 rows: B streamed once in 512-byte row runs into "
                                    "mma.sync, stream-K over one CTA an SM, shared strips added "
                                    "in CTA order in one launch"});
}

}  // namespace arbiter::kernels
