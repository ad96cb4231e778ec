// Launcher of the simt family: a generic shared-memory tiled kernel on plain
// FMA units, for any CUDA architecture the build targets (tier 1, the fallback
// that runs everywhere). f32, f64, f16 and bf16 in; f32 accumulation (f64 for
// f64), C in the input dtype; any M, N, K and alignment.
// Plain C++ header: no device code, no absl.
#pragma once

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

// LaunchSimt: no workspace, sm_count unused. cudaErrorInvalidValue for dims
// outside [1, 2^31); otherwise the launch's own error.
extern const Launcher kSimt;

// Accuracy budgets (engine/contract.h's formula), shared by the contract, the
// tests and bench/kernels: f32 accumulation for f32/f16/bf16, f64 for f64.
inline constexpr double kSimtBudgetAbs = 1e-5;
inline constexpr double kSimtBudgetRel = 2e-6;
inline constexpr double kSimtF64BudgetAbs = 1e-12;
inline constexpr double kSimtF64BudgetRel = 1e-14;

}  // namespace arbiter::kernels
