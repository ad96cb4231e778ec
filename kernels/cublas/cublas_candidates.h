// The vendor-delegate candidates, each a family with f32, f16 and bf16 members
// (f32 accumulation, C in the input dtype):
//   cublas         cublasGemmEx, default algorithm: the delegate everything is measured against.
//   cublaslt_h0..3 cublasLtMatmul with the heuristic's rank-0..3 algorithm for the problem:
//                  measured selection among the vendor's own algorithms (the best of them beat
//                  the default by 3-20% on most H200 shapes, and lost on some). A rank the
//                  heuristic does not offer declines with UNIMPLEMENTED.
//   cublas_padded  leading dims padded to 16 bytes in scratch, then cublasGemmEx: avoids
//                  the align-1 cliff (4095^3 bf16: ~1091 us against ~186 us aligned).
// All are run_to_run: cuBLAS repeats its result bitwise on one stream with a fixed workspace
// (each stream has its own), but rows at small M differ from the same rows inside a large M,
// so none is batch_invariant. The arch claim is sm_80+: bf16 needs sm_80, and it is what the
// device suite verifies (on sm_90).
#pragma once

#include <vector>

#include "engine/candidate.h"

namespace arbiter::cublas {

std::vector<CandidateSpec> MakeCublasCandidates();

}  // namespace arbiter::cublas
