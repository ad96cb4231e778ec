// Every CUDA candidate built into this binary: the vendor delegates
// (kernels/cublas) and whichever hand-written kernel families were built
// (mma_warp, mma_tiled, splitk, gemv, simt, wgmma). Architecture claims are
// not filtered here: the registry lists a candidate whose claim excludes the
// device as ineligible, with the reason.
#pragma once

#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "engine/candidate.h"

namespace arbiter::cuda {

std::vector<CandidateSpec> CudaCandidates(CudaBackend& backend);

}  // namespace arbiter::cuda
