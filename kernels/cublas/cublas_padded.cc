#include "kernels/cublas/cublas_padded.h"

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels/common/pad.h"
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

  // One pass per operand (kernels/common/pad.h), the pad's zeros included:
  // cudaMemcpy2DAsync with rows that are not 16-byte multiples ran at about a
  // third of the copy bandwidth on the H200 (4095^3 bf16: 329 us in all, 241 us
  // with these copies).
  const int element_bytes = static_cast<int>(es);
  const void* a = args.a;
  if (pad_a) {
    CUDA_RETURN_IF_ERROR(
        kernels::LaunchPad2d(args.a, p.m, p.k, p.k, a_pad, p.m, kp, element_bytes, s));
    a = a_pad;
  }
  // B is always re-laid out here: either N or K (its row count, matching A's pad) changed.
  CUDA_RETURN_IF_ERROR(
      kernels::LaunchPad2d(args.b, p.k, p.n, p.n, b_pad, kp, np, element_bytes, s));
  void* c = pad_c ? static_cast<void*>(c_pad) : args.c;
  RETURN_IF_ERROR(RowMajorGemmEx(res, p.dtype, p.m, np, kp, a, kp, b_pad, np, c, np));
  if (pad_c) {
    if (reinterpret_cast<uintptr_t>(args.c) % 16 == 0) {
      CUDA_RETURN_IF_ERROR(
          kernels::LaunchPad2d(c_pad, p.m, p.n, np, args.c, p.m, p.n, element_bytes, s));
    } else {  // the copy kernel stores 16 bytes at a time
      CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(args.c, p.n * es, c_pad, np * es, p.n * es, p.m,
                                             cudaMemcpyDeviceToDevice, s));
    }
  }
  return absl::OkStatus();
}

}  // namespace arbiter::cublas
