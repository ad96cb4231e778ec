// Element types of a matmul problem and conversions between their storage
// form and double. f16 and bf16 are stored as raw 16-bit patterns; conversion
// is done here (round-to-nearest-even) so the engine needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

namespace arbiter {

enum class DType { kF32 = 1, kF64 = 2, kF16 = 3, kBF16 = 4 };

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};

// Bytes per element in storage.
size_t ElementSize(DType dtype);
// "f32", "f64", "f16", "bf16".
const char* DTypeName(DType dtype);
std::optional<DType> ParseDType(std::string_view name);
// Unit roundoff of the storage format (half an ulp at 1.0): 2^-24, 2^-53, 2^-11, 2^-8.
double UnitRoundoff(DType dtype);

std::ostream& operator<<(std::ostream& os, DType dtype);

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

// Element i of a buffer of `dtype`, widened to double.
double LoadAsDouble(DType dtype, const void* data, size_t i);
// Stores `value` rounded to `dtype` at element i.
void StoreFromDouble(DType dtype, void* data, size_t i, double value);
// Fills `count` elements with NaN (the poison pattern: an unwritten element can never pass).
void FillNaN(DType dtype, void* data, size_t count);

}  // namespace arbiter
