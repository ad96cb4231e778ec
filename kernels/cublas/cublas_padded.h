// cuBLAS with the leading dimensions made multiples of 16 bytes. A row-major
// leading dim (K for A, N for B and C) that is not a multiple of 8 f16 makes
// cublasGemmEx fall back to align-1 kernels: 4095^3 bf16 took ~1091 us on the
// H200 against ~186 us at 4096^3. The copies and what the GEMM runs on are
// padded_plan.h's; A and B are copied in one launch (kernels/common/pad.h).
//   PaddedGemm:   cublasGemmEx on the padded problem into a padded C, whose
//                 M x N is copied back (PaddedOutput::kCopyBack).
//   PaddedLtGemm: cuBLASLt reading the aligned copies and writing C in place
//                 at its ragged leading dim, the preference promising each
//                 operand's true row alignment (PaddedOutput::kDirect).
// Shapes already aligned: PaddedGemm runs cublasGemmEx on them as they are;
// PaddedLtGemm declines (the cublaslt_h candidates run those). An odd M alone
// costs nothing (it is not a leading dimension) and is left as is.
#pragma once

#include "engine/backend.h"
#include "engine/status.h"
#include "kernels/cublas/cublaslt_gemm.h"

namespace arbiter::cublas {

absl::Status PaddedGemm(const GemmArgs& args);

// The rank-th heuristic algorithm for the padded problem (algorithms caches
// the heuristic's answers). UNIMPLEMENTED when nothing is ragged or the
// heuristic offers fewer than rank + 1 algorithms.
absl::Status PaddedLtGemm(const GemmArgs& args, int rank, LtAlgorithms& algorithms);

}  // namespace arbiter::cublas
