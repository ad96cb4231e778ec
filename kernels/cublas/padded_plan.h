// Where cublas_padded puts its aligned copies: which operands are copied, at
// which leading dims, at which offsets of the stream's scratch, and how many
// scratch bytes the candidate asks for (and so declares). A pure function of
// the problem: tested with no device.
//
// Kp, Np: K and N rounded up to 16 bytes of elements (8 f16/bf16, 4 f32).
// A is copied to M x Kp when K != Kp; B always to Kp x Np (zero rows and
// columns added, which add nothing to the sums); the GEMM runs M x Np x Kp,
// into an M x Np C in scratch when N != Np, whose M x N is then copied back.
// Thread-safe: no state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/problem.h"

namespace arbiter::cublas {

struct PaddedPlan {
  int64_t kp = 0, np = 0;  // K and N rounded up to PaddedAlignElements: the copies' leading dims
  int64_t gemm_k = 0;      // the K the GEMM runs: kp (k itself when nothing is ragged)
  bool copy_a = false, copy_b = false, copy_c = false;
  int64_t b_rows = 0;  // rows of B's copy: kp
  // Offsets into the scratch (multiples of 256 bytes, so every copy starts
  // 16-byte aligned); an operand not copied takes no bytes.
  size_t a_offset = 0, b_offset = 0, c_offset = 0;
  size_t scratch_bytes = 0;  // what the candidate asks the stream's scratch for
  // Bytes each copy writes (the scratch it uses: a_offset + a_bytes <= b_offset ...).
  size_t a_bytes = 0, b_bytes = 0, c_bytes = 0;

  // Nothing ragged: the problem goes to the GEMM as it is.
  bool aligned() const { return !copy_a && !copy_b && !copy_c; }
};

// What leading dims (in elements) are rounded up to: 16 bytes, the vector
// width the aligned kernels load (8 f16/bf16, 4 f32).
inline int64_t PaddedAlignElements(DType dtype) {
  return 16 / static_cast<int64_t>(ElementSize(dtype));
}

PaddedPlan PlanPadded(const Problem& p);

}  // namespace arbiter::cublas
