// Turns CUDA runtime and cuBLAS return codes into absl::Status naming the call,
// the error name and file:line (DeepGEMM's DG_CUDA_RUNTIME_CHECK style), and
// records sticky device errors - the ones after which the context is unusable
// (cudaErrorIllegalAddress, cudaErrorLaunchFailure, ...) - so the backend's
// Health() reports them and the daemon stops serving.
//
// For .cc files compiled by the host compiler only (absl inside); .cu files
// return cudaError_t and let their .cc caller check it.
//
// Thread-safe: the sticky-error record has internal synchronization.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "engine/status.h"

namespace arbiter::cuda {

// OK for cudaSuccess; else INTERNAL (RESOURCE_EXHAUSTED for out-of-memory,
// UNAVAILABLE for a missing driver or device): "<call> failed: <name> (<text>) at file:line".
// A sticky error is also recorded for Health().
absl::Status CudaStatus(cudaError_t err, const char* call, const char* file, int line);
absl::Status CublasStatus(cublasStatus_t err, const char* call, const char* file, int line);

// Whether `err` leaves the CUDA context unusable for the rest of the process.
bool IsStickyError(cudaError_t err);

// The first sticky error seen in this process (OK when none): a corrupted
// context is per process, so one record serves every backend object.
absl::Status StickyError();
// Records `status` as the sticky error unless one is already recorded.
void RecordStickyError(const absl::Status& status);

}  // namespace arbiter::cuda

// `call` is a CUDA runtime expression; returns its Status from the enclosing function on error.
#define CUDA_RETURN_IF_ERROR(call) \
  RETURN_IF_ERROR(::arbiter::cuda::CudaStatus((call), #call, __FILE__, __LINE__))
// The same for a cuBLAS / cuBLASLt expression.
#define CUBLAS_RETURN_IF_ERROR(call) \
  RETURN_IF_ERROR(::arbiter::cuda::CublasStatus((call), #call, __FILE__, __LINE__))
// A CUDA expression turned into a Status value (for destructors and logs).
#define CUDA_STATUS(call) ::arbiter::cuda::CudaStatus((call), #call, __FILE__, __LINE__)
