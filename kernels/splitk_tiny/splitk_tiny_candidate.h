// Registration of splitk_tiny: "splitk_tiny", f16 and bf16 members whose
// KernelFns launch on a CudaBackend stream (kernels/common/family.h). The
// kernel, its launch geometry and why it is run-to-run deterministic:
// splitk_tiny.cu.
#pragma once

#include "engine/candidate.h"

namespace arbiter::kernels {

CandidateSpec MakeSplitKTinyCandidate();

}  // namespace arbiter::kernels
