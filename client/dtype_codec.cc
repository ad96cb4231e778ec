#include "client/dtype_codec.h"

#include <cmath>
#include <cstring>

namespace arbiter::client {
namespace {

uint32_t FloatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

float BitsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

}  // namespace

size_t ElementBytes(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_F32:
      return 4;
    case v1::DTYPE_F64:
      return 8;
    case v1::DTYPE_F16:
    case v1::DTYPE_BF16:
      return 2;
    default:
      return 0;
  }
}

size_t MatrixBytes(v1::DType dtype, int64_t rows, int64_t cols) {
  const size_t element = ElementBytes(dtype);
  size_t bytes = 0;
  if (rows <= 0 || cols <= 0 || element == 0 ||
      __builtin_mul_overflow(static_cast<size_t>(rows), static_cast<size_t>(cols), &bytes) ||
      __builtin_mul_overflow(bytes, element, &bytes)) {
    return 0;
  }
  return bytes;
}

std::string DTypeShortName(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_F32:
      return "f32";
    case v1::DTYPE_F64:
      return "f64";
    case v1::DTYPE_F16:
      return "f16";
    case v1::DTYPE_BF16:
      return "bf16";
    default:
      return "unspecified";
  }
}

std::optional<v1::DType> ParseDTypeName(std::string_view name) {
  for (v1::DType d : {v1::DTYPE_F32, v1::DTYPE_F64, v1::DTYPE_F16, v1::DTYPE_BF16}) {
    if (DTypeShortName(d) == name) return d;
  }
  return std::nullopt;
}

double StorageRoundoff(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_F32:
      return std::ldexp(1.0, -24);
    case v1::DTYPE_F64:
      return std::ldexp(1.0, -53);
    case v1::DTYPE_F16:
      return std::ldexp(1.0, -11);
    case v1::DTYPE_BF16:
      return std::ldexp(1.0, -8);
    default:
      return 0;
  }
}

uint16_t FloatToHalfBits(float value) {
  const uint32_t x = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;  // NaN stays NaN (quiet)
  // 65520 = 0x477ff000 is the halfway point between 65504 (max half) and 2^16:
  // it and everything above round to infinity.
  if (abs >= 0x477ff000) return sign | 0x7c00;
  if (abs < 0x38800000) {
    // Below 2^-14: a half subnormal, in units of 2^-24. Scaling by 2^24 is exact;
    // nearbyint rounds half to even in the default rounding mode.
    const float scaled = BitsFloat(abs) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  const uint32_t exponent = (abs >> 23) - 127 + 15;
  const uint32_t mantissa = abs & 0x7fffff;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  // Round to nearest, ties to even; a carry into the exponent is the right result.
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return sign | static_cast<uint16_t>(half);
}

float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return BitsFloat(sign | 0x7f800000 | (mantissa << 13));
  return BitsFloat(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t FloatToBFloat16Bits(float value) {
  const uint32_t x = FloatBits(value);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x0040);  // quiet NaN
  const uint32_t rounding = 0x7fff + ((x >> 16) & 1);  // ties to even
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float BFloat16BitsToFloat(uint16_t bits) { return BitsFloat(static_cast<uint32_t>(bits) << 16); }

double LoadElement(v1::DType dtype, const void* data, size_t i) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  switch (dtype) {
    case v1::DTYPE_F32: {
      float f;
      std::memcpy(&f, bytes + 4 * i, 4);
      return f;
    }
    case v1::DTYPE_F64: {
      double d;
      std::memcpy(&d, bytes + 8 * i, 8);
      return d;
    }
    case v1::DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      return HalfBitsToFloat(h);
    }
    case v1::DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      return BFloat16BitsToFloat(h);
    }
    default:
      return std::nan("");
  }
}

void StoreElement(v1::DType dtype, void* data, size_t i, double value) {
  auto* bytes = static_cast<unsigned char*>(data);
  switch (dtype) {
    case v1::DTYPE_F32: {
      const float f = static_cast<float>(value);
      std::memcpy(bytes + 4 * i, &f, 4);
      return;
    }
    case v1::DTYPE_F64:
      std::memcpy(bytes + 8 * i, &value, 8);
      return;
    case v1::DTYPE_F16: {
      // Via f32, so a rare double rounding is possible; checks read back the
      // stored bits, so they compare against exactly what was sent.
      const uint16_t h = FloatToHalfBits(static_cast<float>(value));
      std::memcpy(bytes + 2 * i, &h, 2);
      return;
    }
    case v1::DTYPE_BF16: {
      const uint16_t h = FloatToBFloat16Bits(static_cast<float>(value));
      std::memcpy(bytes + 2 * i, &h, 2);
      return;
    }
    default:
      return;
  }
}

}  // namespace arbiter::client
