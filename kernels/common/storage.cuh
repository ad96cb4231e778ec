// Rounding an f32 accumulator to the 16-bit storage of C (device code only;
// included by .cu files). C is handled as raw 16-bit words so that one kernel
// template serves f16 and bf16.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace arbiter::kernels {

// v rounded to nearest-even in bf16 (kBf16) or f16, as its bit pattern.
template <bool kBf16>
__device__ __forceinline__ uint16_t ToStorage(float v) {
  if constexpr (kBf16) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  } else {
    return __half_as_ushort(__float2half_rn(v));
  }
}

}  // namespace arbiter::kernels
