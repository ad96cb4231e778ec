// Element encodings of the wire dtypes, for clients that build operands and
// check results: f32/f64 as IEEE little-endian, f16 (IEEE half) and bf16 as raw
// 16-bit patterns, narrowed with round-to-nearest-even. The client depends only
// on the wire contract, so these are its own (small) conversions, not the engine's.
//
// Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "arbiter/v1/arbiter.pb.h"

namespace arbiter::client {

// Bytes per element; 0 for DTYPE_UNSPECIFIED or an unknown value.
size_t ElementBytes(v1::DType dtype);
// Bytes of a rows x cols matrix of `dtype`; 0 when a dimension is not positive,
// the dtype unknown, or the product overflows.
size_t MatrixBytes(v1::DType dtype, int64_t rows, int64_t cols);
// "f32", "f64", "f16", "bf16"; "unspecified" otherwise.
std::string DTypeShortName(v1::DType dtype);
// Accepts the short names above.
std::optional<v1::DType> ParseDTypeName(std::string_view name);
// Unit roundoff of the storage format: 2^-24, 2^-53, 2^-11, 2^-8.
double StorageRoundoff(v1::DType dtype);

uint16_t FloatToHalfBits(float value);
float HalfBitsToFloat(uint16_t bits);
uint16_t FloatToBFloat16Bits(float value);
float BFloat16BitsToFloat(uint16_t bits);

// Element i of a buffer of `dtype`, widened to double.
double LoadElement(v1::DType dtype, const void* data, size_t i);
// Stores `value` rounded to `dtype` at element i.
void StoreElement(v1::DType dtype, void* data, size_t i, double value);

}  // namespace arbiter::client
