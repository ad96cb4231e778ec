#include "kernels/cublas/cublas_padded.h"

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels/common/pad.h"
#include "kernels/cublas/cublas_gemm.h"
#include "kernels/cublas/padded_plan.h"

namespace arbiter::cublas {
namespace {

// The operand copies `plan` asks for, A's and B's in one launch: one pass
// over each, the pad's zeros included (cudaMemcpy2DAsync with rows that are
// not 16-byte multiples ran at about a third of the copy bandwidth on the
// H200: 4095^3 bf16 took 329 us in all, 241 us with one copy kernel per
// operand). Sets *a and *b to what the GEMM reads.
absl::Status CopyOperands(const GemmArgs& args, const PaddedPlan& plan, char* scratch,
                          const void** a, const void** b) {
  const Problem& p = args.problem;
  kernels::Pad2dCopy copies[2];
  int count = 0;
  *a = args.a;
  *b = args.b;
  if (plan.copy_a) {
    copies[count++] = {args.a, p.m, p.k, p.k, scratch + plan.a_offset, p.m, plan.kp};
    *a = scratch + plan.a_offset;
  }
  if (plan.copy_b) {
    copies[count++] = {args.b, p.k, p.n, p.n, scratch + plan.b_offset, plan.b_rows, plan.np};
    *b = scratch + plan.b_offset;
  }
  if (count > 0) {
    CUDA_RETURN_IF_ERROR(kernels::LaunchPad2dBatch(
        copies, count, static_cast<int>(ElementSize(p.dtype)), cuda::Resources(args.stream).stream));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PaddedGemm(const GemmArgs& args) {
  const Problem& p = args.problem;
  const cuda::StreamResources& res = cuda::Resources(args.stream);
  const PaddedPlan plan = PlanPadded(p);
  if (plan.aligned()) {
    return RowMajorGemmEx(res, p.dtype, p.m, p.n, p.k, args.a, p.k, args.b, p.n, args.c, p.n);
  }
  ASSIGN_OR_RETURN(void* scratch_ptr, cuda::Scratch(args.stream, plan.scratch_bytes));
  char* scratch = static_cast<char*>(scratch_ptr);
  const void *a, *b;
  RETURN_IF_ERROR(CopyOperands(args, plan, scratch, &a, &b));
  void* c = plan.copy_c ? static_cast<void*>(scratch + plan.c_offset) : args.c;
  const int64_t lda = plan.copy_a ? plan.kp : p.k;
  RETURN_IF_ERROR(
      RowMajorGemmEx(res, p.dtype, p.m, plan.np, plan.gemm_k, a, lda, b, plan.np, c, plan.np));
  if (plan.copy_c) {
    const size_t es = ElementSize(p.dtype);
    if (reinterpret_cast<uintptr_t>(args.c) % 16 == 0) {
      CUDA_RETURN_IF_ERROR(kernels::LaunchPad2d(c, p.m, p.n, plan.np, args.c, p.m, p.n,
                                                static_cast<int>(es), res.stream));
    } else {  // the copy kernel stores 16 bytes at a time
      CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(args.c, p.n * es, c, plan.np * es, p.n * es, p.m,
                                             cudaMemcpyDeviceToDevice, res.stream));
    }
  }
  return absl::OkStatus();
}

}  // namespace arbiter::cublas
