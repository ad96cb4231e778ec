// Registration of wgmma_bt (wgmma_bt.h): one candidate, f16 and bf16 members,
// sm_90a, covering 17-256 rows with N % 8 == 0 and K % 8 == 0. Not listed in
// kernels/registry yet (wgmma_bt.h says why); adding it there is one line. The KernelFn runs
// on the CudaBackend stream in GemmArgs (backends/cuda/cuda_resources.h) and
// declines (UNIMPLEMENTED) operands TMA cannot address (not 16-byte aligned).
#pragma once

#include "engine/candidate.h"

namespace arbiter::kernels {

CandidateSpec MakeWgmmaBtCandidate();

}  // namespace arbiter::kernels
