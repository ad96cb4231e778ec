// Registration of mid_stream (mid_stream.h): one candidate, f16 and bf16
// members, covering 17-128 rows with N % 8 == 0 and K % 8 == 0. Not listed in
// kernels/registry (mid_stream.h says why); adding it there is one line. The KernelFn
// runs on the CudaBackend stream in GemmArgs (backends/cuda/cuda_resources.h)
// with the stream's scratch as its workspace, and declines (UNIMPLEMENTED)
// operands that are not 16-byte aligned.
#pragma once

#include "engine/candidate.h"

namespace arbiter::kernels {

CandidateSpec MakeMidStreamCandidate();

}  // namespace arbiter::kernels
