#include "kernels/cublas/padded_plan.h"

namespace arbiter::cublas {
namespace {

int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }
size_t RoundUpBytes(size_t v) { return (v + 255) / 256 * 256; }

}  // namespace

PaddedPlan PlanPadded(const Problem& p) {
  PaddedPlan plan;
  plan.kp = RoundUp(p.k, PaddedAlignElements(p.dtype));
  plan.np = RoundUp(p.n, PaddedAlignElements(p.dtype));
  const bool ragged_k = plan.kp != p.k, ragged_n = plan.np != p.n;
  if (!ragged_k && !ragged_n) {
    plan.gemm_k = p.k;
    return plan;
  }
  const size_t es = ElementSize(p.dtype);
  plan.copy_a = ragged_k;  // A's leading dim is K
  plan.gemm_k = plan.kp;
  plan.copy_b = true;  // either its row count (Kp) or its leading dim (Np) changes
  plan.b_rows = plan.kp;
  plan.copy_c = ragged_n;  // C's leading dim is N
  plan.a_bytes = plan.copy_a ? static_cast<size_t>(p.m * plan.kp) * es : 0;
  plan.b_bytes = plan.copy_b ? static_cast<size_t>(plan.b_rows * plan.np) * es : 0;
  plan.c_bytes = plan.copy_c ? static_cast<size_t>(p.m * plan.np) * es : 0;
  plan.a_offset = 0;
  plan.b_offset = plan.a_offset + RoundUpBytes(plan.a_bytes);
  plan.c_offset = plan.b_offset + RoundUpBytes(plan.b_bytes);
  plan.scratch_bytes = plan.c_offset + RoundUpBytes(plan.c_bytes);
  return plan;
}

}  // namespace arbiter::cublas
