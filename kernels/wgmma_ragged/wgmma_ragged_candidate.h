// The wgmma_ragged candidate (wgmma_ragged.h): f16 and bf16 members, arch
// sm_90a, K % 8 == 0; it declines N % 8 == 0 (the TMA families' ground) and
// operands it cannot address (kWgmmaRagged.unsupported).
#pragma once

#include "engine/candidate.h"

namespace arbiter::kernels {

CandidateSpec MakeWgmmaRaggedCandidate();

}  // namespace arbiter::kernels
