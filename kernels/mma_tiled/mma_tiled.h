// Launcher of the mma_tiled family: CTA-tiled tensor-core GEMM with a cp.async
// multi-stage shared-memory pipeline and ldmatrix feeding mma.sync.m16n8k16.
// sm_80+; f16 and bf16 in, f32 accumulation, C in the input dtype; any M, N, K.
// 16-byte cp.async needs K % 8 == 0, N % 8 == 0 and 16-byte aligned A, B; other
// problems first copy A and B into zero-padded scratch (same bits, one extra
// pass over the operands).
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "engine/dtype.h"

namespace arbiter::kernels {

struct MmaTiledArgs {
  DType dtype = DType::kF16;  // kF16 or kBF16
  const void* a = nullptr;    // device, [m, k] row-major
  const void* b = nullptr;    // device, [k, n] row-major
  void* c = nullptr;          // device, [m, n] row-major, fully overwritten
  int64_t m = 0, n = 0, k = 0;
  // Multiprocessors of the device: 128x128 tiles when they fill it (and the
  // cp.async path applies), else 64x64.
  // The tile shape never changes the output bits (see tile_mainloop.cuh).
  int sm_count = 132;
  void* workspace = nullptr;  // device scratch of MmaTiledWorkspaceBytes(*this) bytes
  size_t workspace_bytes = 0;
};

// Scratch the launch needs: 0 when the operands are aligned as they are, else
// room for zero-padded copies of A and B.
size_t MmaTiledWorkspaceBytes(const MmaTiledArgs& args);

// Enqueues the kernel(s) on `stream`. cudaErrorInvalidValue for a dtype other
// than f16/bf16, dims outside [1, 2^31) or too little workspace; otherwise the
// first launch error.
cudaError_t LaunchMmaTiled(const MmaTiledArgs& args, cudaStream_t stream);

// Accuracy budget (engine/contract.h's formula), shared by the contract, the
// tests and bench/kernels. Measured headroom: bench/results/cuda-kernels-h200.md.
inline constexpr double kMmaTiledBudgetAbs = 1e-5;
inline constexpr double kMmaTiledBudgetRel = 2e-6;

}  // namespace arbiter::kernels
