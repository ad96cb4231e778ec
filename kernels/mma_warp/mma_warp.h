// Launcher of the mma_warp family: the simple hand-written tensor-core kernel.
// One warp per 16x8 tile of C with mma.sync.m16n8k16, K reduced serially in
// registers. sm_80+; f16 and bf16 in, f32 accumulation, C in the input dtype.
// Plain C++ header: no CUDA device code, no absl; the candidate .cc turns the
// cudaError_t into a status.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "engine/dtype.h"

namespace arbiter::kernels {

struct MmaWarpArgs {
  DType dtype = DType::kF16;  // kF16 or kBF16
  const void* a = nullptr;    // device, [m, k] row-major
  const void* b = nullptr;    // device, [k, n] row-major
  void* c = nullptr;          // device, [m, n] row-major, fully overwritten
  int64_t m = 0, n = 0, k = 0;
};

// Enqueues the kernel on `stream`. cudaErrorInvalidValue for a dtype other than
// f16/bf16 or dims outside [1, 2^31); otherwise the launch's own error.
cudaError_t LaunchMmaWarp(const MmaWarpArgs& args, cudaStream_t stream);

// Accuracy budget (engine/contract.h's formula), shared by the contract, the
// tests and bench/kernels. Measured headroom: bench/results/cuda-kernels-h200.md.
inline constexpr double kMmaWarpBudgetAbs = 1e-5;
inline constexpr double kMmaWarpBudgetRel = 2e-6;

}  // namespace arbiter::kernels
