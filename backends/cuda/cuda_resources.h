// What a CUDA candidate's KernelFn needs from the stream it runs on. Included
// only by CUDA-side code (backends/cuda, kernels/*): never by the engine.
#pragma once

#include <cstddef>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter::cuda {

// Per-stream resources, owned by the CudaBackend's stream. Valid for the
// stream's lifetime; used by one worker at a time, like the stream.
struct StreamResources {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;      // bound to `stream`, with its own workspace
  cublasLtHandle_t cublas_lt = nullptr;
  void* lt_workspace = nullptr;         // for cublasLtMatmul
  size_t lt_workspace_bytes = 0;
  const cudaDeviceProp* props = nullptr;  // the stream's device; never null once created
};

// The resources of an engine Stream created by CudaBackend. `s` must be one.
const StreamResources& Resources(Stream* s);

// Device scratch of at least `bytes` owned by the stream (grown on demand,
// never shrunk; contents undefined). For split-K partials, padded copies, ...
absl::StatusOr<void*> Scratch(Stream* s, size_t bytes);

}  // namespace arbiter::cuda
