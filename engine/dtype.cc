#include "engine/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/load_as.h"

namespace arbiter {

size_t ElementSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "unknown";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

double UnitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::kF32: return std::ldexp(1.0, -24);
    case DType::kF64: return std::ldexp(1.0, -53);
    case DType::kF16: return std::ldexp(1.0, -11);
    case DType::kBF16: return std::ldexp(1.0, -8);
  }
  return 0;
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << DTypeName(dtype); }

uint16_t FloatToHalf(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));  // Inf/NaN
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to Inf
  if (e <= 0) {
    // Subnormal half (or zero): shift the implicit-1 mantissa, round to nearest even.
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into Inf: correct
  return static_cast<uint16_t>(sign | half);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = (bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t FloatToBFloat16(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

double LoadAsDouble(DType dtype, const void* data, size_t i) {
  switch (dtype) {
    case DType::kF32: return LoadAs<DType::kF32>(data, i);
    case DType::kF64: return LoadAs<DType::kF64>(data, i);
    case DType::kF16: return LoadAs<DType::kF16>(data, i);
    case DType::kBF16: return LoadAs<DType::kBF16>(data, i);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

void StoreFromDouble(DType dtype, void* data, size_t i, double value) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(data)[i] = static_cast<float>(value); return;
    case DType::kF64: static_cast<double*>(data)[i] = value; return;
    case DType::kF16:
      static_cast<uint16_t*>(data)[i] = FloatToHalf(static_cast<float>(value));
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(data)[i] = FloatToBFloat16(static_cast<float>(value));
      return;
  }
}

void FillNaN(DType dtype, void* data, size_t count) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t i = 0; i < count; ++i) StoreFromDouble(dtype, data, i, nan);
}

}  // namespace arbiter
