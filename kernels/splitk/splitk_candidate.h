// Registration of the splitk candidates: "splitk" (fixed-order reduction of
// per-split partials, run_to_run) and "splitk_atomic" (f32 atomics,
// nondeterministic), each with f16 and bf16 members. The kernels, their launch
// geometry and why each is (non)deterministic: splitk.cu.
#pragma once

#include <vector>

#include "engine/candidate.h"

namespace arbiter {

// The member KernelFns take their cudaStream_t and scratch from
// arbiter::cuda::Resources / arbiter::cuda::Scratch
// (backends/cuda/cuda_resources.h), resolved when the daemon links arbiter_cuda.
std::vector<CandidateSpec> MakeSplitkCandidate();

}  // namespace arbiter
