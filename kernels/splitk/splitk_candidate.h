// Registration of the splitk candidates: "splitk" (fixed-order reduction of
// per-split partials, run_to_run) and "splitk_atomic" (f32 atomics,
// nondeterministic), each with f16 and bf16 members whose KernelFns launch on a
// CudaBackend stream (kernels/common/family.h). The kernels, their launch
// geometry and why each is (non)deterministic: splitk.cu.
#pragma once

#include <vector>

#include "engine/candidate.h"

namespace arbiter::kernels {

std::vector<CandidateSpec> MakeSplitkCandidate();

}  // namespace arbiter::kernels
