// Launcher of the gemv family, for M in 1..16 (cuBLAS takes ~23 us for
// 1x4096x4096 against a ~8 us bandwidth floor): bandwidth-bound, each block
// streams a strip of B columns with 16-byte loads and keeps every row of C for
// them in f32 registers; K is split across blocks (f32 partials in scratch,
// added in a fixed order) when N alone gives too few blocks. Any arch (plain
// FFMA); f16 and bf16 in, f32 accumulation, C in the input dtype; M <= 16, any
// N and K (16-byte loads when N % 8 == 0, K % 8 == 0 and A, B are aligned;
// element loads otherwise).
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "engine/dtype.h"

namespace arbiter::kernels {

inline constexpr int64_t kGemvMaxM = 16;

struct GemvArgs {
  DType dtype = DType::kF16;  // kF16 or kBF16
  const void* a = nullptr;    // device, [m, k] row-major
  const void* b = nullptr;    // device, [k, n] row-major
  void* c = nullptr;          // device, [m, n] row-major, fully overwritten
  int64_t m = 0, n = 0, k = 0;
  int sm_count = 132;         // multiprocessors: the K split count aims to fill them
  void* workspace = nullptr;  // device scratch of GemvWorkspaceBytes(*this) bytes
  size_t workspace_bytes = 0;
};

// Scratch the launch needs: 0 without a K split, else splits * M * N floats.
size_t GemvWorkspaceBytes(const GemvArgs& args);

// Enqueues the kernel(s) on `stream`. cudaErrorInvalidValue for a dtype other
// than f16/bf16, M outside [1, 16], N, K outside [1, 2^31) or too little
// workspace; else the first launch error.
cudaError_t LaunchGemv(const GemvArgs& args, cudaStream_t stream);

// Accuracy budget (engine/contract.h's formula), shared by the contract, the
// tests and bench/kernels.
inline constexpr double kGemvBudgetAbs = 1e-5;
inline constexpr double kGemvBudgetRel = 2e-6;

}  // namespace arbiter::kernels
