// LoadAs<D>(data, i): element i of a buffer of dtype D widened to double (exact
// for all four), the dtype fixed at compile time - LoadAsDouble for inner loops,
// where a switch per element would cost. The host references (the CPU backend's
// and the cpu_reference kernel's) read their operands through it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/dtype.h"

namespace arbiter {

template <DType D>
double LoadAs(const void* data, size_t i) {
  if constexpr (D == DType::kF32) {
    return static_cast<const float*>(data)[i];
  } else if constexpr (D == DType::kF64) {
    return static_cast<const double*>(data)[i];
  } else if constexpr (D == DType::kF16) {
    return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
  } else {
    return BFloat16ToFloat(static_cast<const uint16_t*>(data)[i]);
  }
}

}  // namespace arbiter
