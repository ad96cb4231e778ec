// Every CUDA candidate built into this binary: the vendor delegates
// (kernels/cublas) and the hand-written kernel families (mma_warp, mma_tiled,
// splitk, gemv, simt, wgmma). Part of the registry, the one place above the
// runtime and the kernels that lists what a daemon serves. Architecture claims
// are not filtered here: the engine's registry lists a candidate whose claim
// excludes the device as ineligible, with the reason.
#pragma once

#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "engine/candidate.h"

namespace arbiter::cuda {

std::vector<CandidateSpec> CudaCandidates(CudaBackend& backend);

}  // namespace arbiter::cuda
