#include "kernels/cublas/cublas_padded.h"

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels/cublas/cublas_gemm.h"

namespace arbiter::cublas {
namespace {

constexpr int64_t kAlign = 8;  // elements: 16 bytes of f16/bf16

int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }
size_t RoundUpBytes(size_t v) { return (v + 255) / 256 * 256; }

}  // namespace

absl::Status PaddedGemm(const GemmArgs& args) {
  const Problem& p = args.problem;
  const cuda::StreamResources& res = cuda::Resources(args.stream);
  const int64_t kp = RoundUp(p.k, kAlign), np = RoundUp(p.n, kAlign);
  if (kp == p.k && np == p.n) {
    return RowMajorGemmEx(res, p.dtype, p.m, p.n, p.k, args.a, p.k, args.b, p.n, args.c, p.n);
  }
  const size_t es = ElementSize(p.dtype);
  const bool pad_a = kp != p.k;  // A's leading dim is K
  const bool pad_c = np != p.n;  // C's (and B's) leading dim is N
  const size_t a_bytes = pad_a ? RoundUpBytes(p.m * kp * es) : 0;
  const size_t b_bytes = RoundUpBytes(kp * np * es);
  const size_t c_bytes = pad_c ? RoundUpBytes(p.m * np * es) : 0;
  ASSIGN_OR_RETURN(void* scratch, cuda::Scratch(args.stream, a_bytes + b_bytes + c_bytes));
  char* a_pad = static_cast<char*>(scratch);
  char* b_pad = a_pad + a_bytes;
  char* c_pad = b_pad + b_bytes;
  const cudaStream_t s = res.stream;

  const void* a = args.a;
  if (pad_a) {
    CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(a_pad, kp * es, args.a, p.k * es, p.k * es, p.m,
                                           cudaMemcpyDeviceToDevice, s));
    CUDA_RETURN_IF_ERROR(
        cudaMemset2DAsync(a_pad + p.k * es, kp * es, 0, (kp - p.k) * es, p.m, s));
    a = a_pad;
  }
  // B is always re-laid out here: either N or K (its row count, matching A's pad) changed.
  CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(b_pad, np * es, args.b, p.n * es, p.n * es, p.k,
                                         cudaMemcpyDeviceToDevice, s));
  if (np != p.n) {
    CUDA_RETURN_IF_ERROR(
        cudaMemset2DAsync(b_pad + p.n * es, np * es, 0, (np - p.n) * es, p.k, s));
  }
  if (kp != p.k) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b_pad + p.k * np * es, 0, (kp - p.k) * np * es, s));
  }
  void* c = pad_c ? static_cast<void*>(c_pad) : args.c;
  RETURN_IF_ERROR(RowMajorGemmEx(res, p.dtype, p.m, np, kp, a, kp, b_pad, np, c, np));
  if (pad_c) {
    CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(args.c, p.n * es, c_pad, np * es, p.n * es, p.m,
                                           cudaMemcpyDeviceToDevice, s));
  }
  return absl::OkStatus();
}

}  // namespace arbiter::cublas
