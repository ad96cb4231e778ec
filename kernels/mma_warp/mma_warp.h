// Launcher of the mma_warp family: the simple hand-written tensor-core kernel.
// One warp per 16x8 tile of C with mma.sync.m16n8k16, K reduced serially in
// registers. sm_80+; f16 and bf16 in, f32 accumulation, C in the input dtype.
// Plain C++ header: no CUDA device code, no absl; the registration turns the
// cudaError_t into a status.
#pragma once

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

// LaunchMmaWarp: no workspace, sm_count unused. cudaErrorInvalidValue for a
// dtype other than f16/bf16 or dims outside [1, 2^31); otherwise the launch's
// own error.
extern const Launcher kMmaWarp;

// Accuracy budget (engine/contract.h's formula), shared by the contract, the
// tests and bench/kernels. Measured headroom: bench/results/cuda-kernels-h200.md.
inline constexpr double kMmaWarpBudgetAbs = 1e-5;
inline constexpr double kMmaWarpBudgetRel = 2e-6;

}  // namespace arbiter::kernels
