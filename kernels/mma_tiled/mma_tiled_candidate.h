// Registration of the mma_tiled candidate: its contract family (one member per
// dtype) and the KernelFn that launches it on a CudaBackend stream
// (kernels/common/family.h). The kernel, its launch geometry and why it is
// deterministic: mma_tiled.cu.
#pragma once

#include "engine/candidate.h"

namespace arbiter::kernels {

CandidateSpec MakeMmaTiledCandidate();

}  // namespace arbiter::kernels
