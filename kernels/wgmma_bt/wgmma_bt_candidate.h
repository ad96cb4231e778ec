// Registration of wgmma_bt (wgmma_bt.h): one candidate, f16 and bf16 members,
// sm_90a, raced at 17-256 rows with N % 8 == 0 and K % 8 == 0. The KernelFn runs
// on the CudaBackend stream in GemmArgs (backends/cuda/cuda_resources.h) and
// declines (UNIMPLEMENTED) operands TMA cannot address (not 16-byte aligned).
#pragma once

#include "engine/candidate.h"

namespace arbiter::kernels {

CandidateSpec MakeWgmmaBtCandidate();

}  // namespace arbiter::kernels
