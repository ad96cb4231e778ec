// What every hand-written CUDA family's launcher takes, and the small rules they
// share: one argument type, the entry points a family exposes (Launcher), the
// dimension range every launcher accepts, and ceil_div for grid sizes.
// Plain C++ header: no device code, no absl; usable from .cc files, .cu files
// and the bench tools.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "engine/dtype.h"

namespace arbiter::kernels {

// C[m, n] = A[m, k] B[k, n], all row-major, on the device.
struct LaunchArgs {
  DType dtype = DType::kF16;  // the family's header says which dtypes it takes
  const void* a = nullptr;    // device, [m, k] row-major
  const void* b = nullptr;    // device, [k, n] row-major
  void* c = nullptr;          // device, [m, n] row-major, fully overwritten
  int64_t m = 0, n = 0, k = 0;
  // Multiprocessors of the device: families whose plan aims to fill the SMs
  // (tile size, split count) read it; the others ignore it.
  int sm_count = 132;
  void* workspace = nullptr;  // device scratch of launcher.workspace_bytes(*this) bytes
  size_t workspace_bytes = 0;
};

// A family's entry points, as its registration (family.h), the tests and the
// bench tools call them.
struct Launcher {
  // The launch function's name ("LaunchMmaWarp"): the contract's entry point
  // and the call named in errors.
  const char* name = "";
  // Enqueues the kernel(s) on the stream. cudaErrorInvalidValue (nothing
  // launched) for arguments the family does not take; else the first launch error.
  cudaError_t (*launch)(const LaunchArgs& args, cudaStream_t stream) = nullptr;
  // The scratch `launch` needs for these arguments (0: none); null when the
  // family never needs any.
  size_t (*workspace_bytes)(const LaunchArgs& args) = nullptr;
  // Why the family cannot run these arguments (nullptr: it can), asked before
  // any launch so that the registration declines them (UNIMPLEMENTED) instead
  // of failing; null when the family takes every argument the contract covers
  // (e.g. TMA families need 16-byte-aligned operands, which no contract names).
  const char* (*unsupported)(const LaunchArgs& args) = nullptr;
};

inline constexpr int64_t CeilDiv(int64_t x, int64_t y) { return (x + y - 1) / y; }

// Grid and index arithmetic inside the kernels is 32-bit: every dimension is
// in [1, 2^31).
inline constexpr int64_t kMaxLaunchDim = int64_t{1} << 31;
inline bool DimsInRange(const LaunchArgs& args) {
  return args.m >= 1 && args.n >= 1 && args.k >= 1 && args.m < kMaxLaunchDim &&
         args.n < kMaxLaunchDim && args.k < kMaxLaunchDim;
}

}  // namespace arbiter::kernels
