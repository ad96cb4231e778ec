#include "backends/cuda/cuda_check.h"

#include <mutex>

#include "absl/strings/str_cat.h"

namespace arbiter::cuda {
namespace {

std::mutex sticky_mu;
absl::Status* sticky_error = nullptr;  // guarded by sticky_mu; leaked on purpose (process lifetime)

absl::StatusCode CodeFor(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::StatusCode::kUnavailable;
    case cudaErrorInvalidValue:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

bool IsStickyError(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  absl::Status status(CodeFor(err), absl::StrCat(call, " failed: ", cudaGetErrorName(err), " (",
                                                 cudaGetErrorString(err), ") at ", file, ":",
                                                 line));
  if (IsStickyError(err)) {
    RecordStickyError(absl::Status(
        status.code(), absl::StrCat("sticky CUDA device error: ", status.message())));
  }
  return status;
}

absl::Status CublasStatus(cublasStatus_t err, const char* call, const char* file, int line) {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (err == CUBLAS_STATUS_ALLOC_FAILED) code = absl::StatusCode::kResourceExhausted;
  if (err == CUBLAS_STATUS_NOT_SUPPORTED || err == CUBLAS_STATUS_ARCH_MISMATCH) {
    code = absl::StatusCode::kUnimplemented;
  }
  if (err == CUBLAS_STATUS_INVALID_VALUE) code = absl::StatusCode::kInvalidArgument;
  absl::Status status(code, absl::StrCat(call, " failed: ", cublasGetStatusName(err), " (",
                                         cublasGetStatusString(err), ") at ", file, ":", line));
  // cuBLAS reports a kernel fault as EXECUTION_FAILED; whether the context is
  // gone shows in the runtime's own sticky state.
  if (err == CUBLAS_STATUS_EXECUTION_FAILED) {
    const cudaError_t runtime = cudaPeekAtLastError();
    if (IsStickyError(runtime)) {
      RecordStickyError(absl::InternalError(absl::StrCat(
          "sticky CUDA device error: ", status.message(), " (runtime: ",
          cudaGetErrorName(runtime), ")")));
    }
  }
  return status;
}

absl::Status StickyError() {
  std::lock_guard<std::mutex> lock(sticky_mu);
  return sticky_error == nullptr ? absl::OkStatus() : *sticky_error;
}

void RecordStickyError(const absl::Status& status) {
  if (status.ok()) return;
  std::lock_guard<std::mutex> lock(sticky_mu);
  if (sticky_error == nullptr) sticky_error = new absl::Status(status);
}

}  // namespace arbiter::cuda
