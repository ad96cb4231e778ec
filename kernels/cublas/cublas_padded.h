// cuBLAS with the leading dimensions made multiples of 16 bytes. A row-major
// leading dim (K for A, N for B and C) that is not a multiple of 8 f16 makes
// cublasGemmEx fall back to align-1 kernels: 4095^3 bf16 took ~1091 us on the
// H200 against ~186 us at 4096^3. padded_plan.h says what is copied where: A
// and B go into padded scratch in one launch (kernels/common/pad.h), cuBLAS
// writes a padded C, and its M x N is copied back. Shapes already aligned go
// straight to cuBLAS; an odd M alone costs nothing (it is not a leading
// dimension) and is left as is.
//
// Writing C in place at its ragged leading dim through cuBLASLt (the
// preference promising C's 2-byte row alignment) instead of copying it back
// lost everywhere on the H200: its heuristic offers narrow kernels, 1.5x
// slower at 512x30522x768 f16 and 4.5x at 4095^3 bf16
// (bench/results/cublas-padded-h200.md).
#pragma once

#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter::cublas {

absl::Status PaddedGemm(const GemmArgs& args);

}  // namespace arbiter::cublas
