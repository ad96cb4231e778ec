// Launcher of the simt family: a generic shared-memory tiled kernel on plain
// FMA units, for any CUDA architecture the build targets (tier 1, the fallback
// that runs everywhere). f32, f64, f16 and bf16 in; f32 accumulation (f64 for
// f64), C in the input dtype; any M, N, K and alignment.
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "engine/dtype.h"

namespace arbiter::kernels {

struct SimtArgs {
  DType dtype = DType::kF32;
  const void* a = nullptr;  // device, [m, k] row-major
  const void* b = nullptr;  // device, [k, n] row-major
  void* c = nullptr;        // device, [m, n] row-major, fully overwritten
  int64_t m = 0, n = 0, k = 0;
};

// Enqueues the kernel on `stream`. cudaErrorInvalidValue for dims outside
// [1, 2^31); otherwise the launch's own error.
cudaError_t LaunchSimt(const SimtArgs& args, cudaStream_t stream);

// Accuracy budgets (engine/contract.h's formula), shared by the contract, the
// tests and bench/kernels: f32 accumulation for f32/f16/bf16, f64 for f64.
inline constexpr double kSimtBudgetAbs = 1e-5;
inline constexpr double kSimtBudgetRel = 2e-6;
inline constexpr double kSimtF64BudgetAbs = 1e-12;
inline constexpr double kSimtF64BudgetRel = 1e-14;

}  // namespace arbiter::kernels
