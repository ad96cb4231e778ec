// openblas: the vendor delegate - cblas_sgemm / cblas_dgemm, row-major, beta 0
// (OpenBLAS then writes C without reading it, so NaN poison cannot leak in).
//
// Members f32 and f64 only: Debian's OpenBLAS 0.3.21 declares cblas_sbgemm in
// cblas.h but the library does not export it (built without BUILD_BFLOAT16),
// and OpenBLAS has no f16 GEMM.
//
// Determinism: run_to_run. OpenBLAS splits a GEMM over M and N only (never K),
// by a thread count CpuBackend pins at Create; the split depends on M, so rows
// may round differently at another M: not batch_invariant.
#pragma once

#include "engine/candidate.h"

namespace arbiter {

CandidateSpec MakeOpenBlasCandidate();

}  // namespace arbiter
