// Launcher of the mma_tiled family: CTA-tiled tensor-core GEMM with a cp.async
// multi-stage shared-memory pipeline and ldmatrix feeding mma.sync.m16n8k16.
// sm_80+; f16 and bf16 in, f32 accumulation, C in the input dtype; any M, N, K.
// 16-byte cp.async needs K % 8 == 0, N % 8 == 0 and 16-byte aligned A, B; other
// problems first copy A and B into zero-padded scratch (same bits, one extra
// pass over the operands).
// The tile is 128x128 when such tiles fill args.sm_count multiprocessors, else
// 64x64; the tile shape never changes the output bits (kernels/common/tile_mainloop.cuh).
// Plain C++ header: no device code, no absl.
#pragma once

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

// LaunchMmaTiled. Workspace: 0 when the operands are aligned as they are, else
// room for zero-padded copies of A and B. cudaErrorInvalidValue for a dtype
// other than f16/bf16, dims outside [1, 2^31) or too little workspace;
// otherwise the first launch error.
extern const Launcher kMmaTiled;

// Accuracy budget (engine/contract.h's formula), shared by the contract, the
// tests and bench/kernels. Measured headroom: bench/results/cuda-kernels-h200.md.
inline constexpr double kMmaTiledBudgetAbs = 1e-5;
inline constexpr double kMmaTiledBudgetRel = 2e-6;

}  // namespace arbiter::kernels
