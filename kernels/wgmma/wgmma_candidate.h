// The wgmma candidates: one per tile configuration of the Hopper GEMM in
// wgmma_gemm.h, each a family of f16 and bf16 members. A candidate's tile is
// fixed, never chosen from M, so each claims batch_invariant - except the
// split-K and stream-K tiles, whose K split follows the tile count (run to
// run); measured selection decides which tile serves which shape bucket.
//
// The KernelFn runs on the CudaBackend stream in GemmArgs (via
// arbiter::cuda::Resources, backends/cuda/cuda_resources.h).
#pragma once

#include <vector>

#include "engine/candidate.h"

namespace arbiter {

// "wgmma_128x128", "wgmma_128x256" and "wgmma_64x256_splitk" (M <= 1024):
// arch "sm_90a", tier 3, K % 8 == 0 and N % 8 == 0. The stream-K tiles are
// not listed (the .cc says why); their members would claim M <= 2048.
std::vector<CandidateSpec> MakeWgmmaCandidates();

}  // namespace arbiter
