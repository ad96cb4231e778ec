// Launcher of the splitk family, for small M*N with large K (16x16x65536 takes
// cuBLAS ~19 us against a ~1 us floor): K is split across CTAs so that a small C
// still fills the device. sm_80+; f16 and bf16 in, f32 accumulation, C in the
// input dtype; any M, N, K. Two variants:
//  - splitk: each split writes its f32 partial tile to scratch; a second kernel
//    sums the partials in split order (run-to-run deterministic).
//  - splitk_atomic: each split atomically adds into one f32 scratch matrix, then
//    a kernel converts it to C (nondeterministic: float addition order varies).
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "engine/dtype.h"

namespace arbiter::kernels {

struct SplitKArgs {
  DType dtype = DType::kF16;  // kF16 or kBF16
  const void* a = nullptr;    // device, [m, k] row-major
  const void* b = nullptr;    // device, [k, n] row-major
  void* c = nullptr;          // device, [m, n] row-major, fully overwritten
  int64_t m = 0, n = 0, k = 0;
  bool atomic = false;        // the splitk_atomic variant
  int sm_count = 132;         // multiprocessors: the split count aims to fill them
  void* workspace = nullptr;  // device scratch of SplitKWorkspaceBytes(*this) bytes
  size_t workspace_bytes = 0;
};

// Scratch the launch needs: splits * M * N floats (M * N with `atomic`), plus
// zero-padded copies of A and B when they are not 16-byte loadable as given
// (K or N not a multiple of 8, or unaligned pointers).
size_t SplitKWorkspaceBytes(const SplitKArgs& args);

// Enqueues the kernels on `stream`. cudaErrorInvalidValue for a dtype other than
// f16/bf16, dims outside [1, 2^31) or too little workspace; otherwise the first
// launch error.
cudaError_t LaunchSplitK(const SplitKArgs& args, cudaStream_t stream);

// Accuracy budget (engine/contract.h's formula) of both variants, shared by the
// contracts, the tests and bench/kernels.
inline constexpr double kSplitKBudgetAbs = 1e-5;
inline constexpr double kSplitKBudgetRel = 2e-6;

}  // namespace arbiter::kernels
