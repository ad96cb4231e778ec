// Kernels the CUDA tests plant on purpose (plain CUDA, no absl).
#pragma once

#include <cuda_runtime_api.h>

namespace arbiter::cuda::testing {

// Writes through a pointer that maps nothing: the launch succeeds and the next
// synchronization reports cudaErrorIllegalAddress, a sticky error.
cudaError_t LaunchIllegalWrite(cudaStream_t stream);

}  // namespace arbiter::cuda::testing
