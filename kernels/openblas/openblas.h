// openblas: the vendor delegate - cblas_sgemm / cblas_dgemm, row-major, beta 0
// (OpenBLAS then writes C without reading it, so NaN poison cannot leak in).
//
// Members f32 and f64 only: Debian's OpenBLAS 0.3.21 declares cblas_sbgemm in
// cblas.h but the library does not export it (built without BUILD_BFLOAT16),
// and OpenBLAS has no f16 GEMM.
//
// Determinism: run_to_run. OpenBLAS partitions a GEMM by a thread count that
// CpuBackend pins at Create, so identical inputs take identical paths (the
// engine verifies this by running it twice). The partition and its small-matrix
// paths depend on M, so a row may round differently at another M: not
// batch_invariant.
#pragma once

#include "engine/candidate.h"

namespace arbiter {

CandidateSpec MakeOpenBlasCandidate();

}  // namespace arbiter
