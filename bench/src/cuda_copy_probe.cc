#include "bench/src/cuda_copy_probe.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"

namespace arbiter::bench {
namespace {

absl::Status Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(e)));
}

}  // namespace

absl::StatusOr<std::vector<double>> CudaCopySeconds(size_t bytes, int repeats) {
  void* src = nullptr;
  void* dst = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<double> seconds;
  absl::Status status = Check(cudaMalloc(&src, bytes), "cudaMalloc");
  if (status.ok()) status = Check(cudaMalloc(&dst, bytes), "cudaMalloc");
  if (status.ok()) status = Check(cudaMemset(src, 1, bytes), "cudaMemset");
  if (status.ok()) status = Check(cudaEventCreate(&start), "cudaEventCreate");
  if (status.ok()) status = Check(cudaEventCreate(&stop), "cudaEventCreate");
  if (status.ok()) status = Check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
  for (int i = 0; status.ok() && i < repeats; ++i) {
    cudaEventRecord(start, nullptr);
    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr);
    cudaEventRecord(stop, nullptr);
    status = Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    if (status.ok()) status = Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    seconds.push_back(ms * 1e-3);
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (src) cudaFree(src);
  if (dst) cudaFree(dst);
  RETURN_IF_ERROR(status);
  return seconds;
}

}  // namespace arbiter::bench
