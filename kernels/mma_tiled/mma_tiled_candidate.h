// Registration of the mma_tiled candidate: its contract family (one member per
// dtype) and the KernelFn that launches it on a CudaBackend stream. The kernel,
// its launch geometry and why it is (non)deterministic: mma_tiled.cu.
#pragma once

#include "engine/candidate.h"

namespace arbiter {

// The member KernelFns take their cudaStream_t from arbiter::cuda::Resources
// (backends/cuda/cuda_resources.h), resolved when the daemon links arbiter_cuda.
CandidateSpec MakeMmaTiledCandidate();

}  // namespace arbiter
