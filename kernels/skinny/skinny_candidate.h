// Registration of the skinny candidate: its contract family (one member per
// dtype) and the KernelFn that launches skinny_stream's default config on a
// CudaBackend stream (kernels/common/family.h). The kernel, its launch geometry
// and why it is deterministic and batch invariant: skinny_stream.cu.
#pragma once

#include "engine/candidate.h"

namespace arbiter::kernels {

CandidateSpec MakeSkinnyCandidate();

}  // namespace arbiter::kernels
