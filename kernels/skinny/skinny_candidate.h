// Registration of the skinny candidate: its contract family (one member per
// dtype) and the KernelFn that launches skinny_stream's default config on a
// CudaBackend stream (kernels/common/family.h). The kernel, its launch geometry
// and why it is deterministic and batch invariant: skinny_stream.cu.
#pragma once

#include "engine/candidate.h"

namespace arbiter::kernels {

CandidateSpec MakeSkinnyCandidate();
// The wide config (256-column strips) at 9-16 rows: skinny_stream.h says where.
CandidateSpec MakeSkinnyWideCandidate();
// The span config at 1-16 rows of a ragged N (N % 8 != 0): skinny_stream.h.
CandidateSpec MakeSkinnyRaggedCandidate();

}  // namespace arbiter::kernels
