#include "tests/backends/cuda/test_kernels.h"

namespace arbiter::cuda::testing {
namespace {

__global__ void IllegalWriteKernel(float* p) { p[threadIdx.x] = 1.0f; }

}  // namespace

cudaError_t LaunchIllegalWrite(cudaStream_t stream) {
  // An address in the low page, which CUDA never maps.
  IllegalWriteKernel<<<1, 32, 0, stream>>>(reinterpret_cast<float*>(0x10));
  return cudaGetLastError();
}

}  // namespace arbiter::cuda::testing
