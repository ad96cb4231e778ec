// The random operands the measurer (and the dispatcher's live checks) run
// kernels on: N(0, 0.5^2) rounded to the dtype, never zero.
//
// Up to kRandomTableEntries elements, each is one draw. Past that, the draws go
// into a table of kRandomTableEntries values (stored as the dtype) and element i
// is the entry picked by SplitMix64(key + i) (its low 16 bits), its sign bit
// flipped when bit 16 of that hash is set: a pure function of (seed, i), so the
// same seed gives the same values however the fill is split - across host
// threads, or on a device from a copy of the table (Stream::FillRandom).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/dtype.h"

namespace arbiter {

inline constexpr size_t kRandomTableEntries = size_t{1} << 16;

// A counter-based 64-bit mix (splitmix64's finalizer): distinct inputs, well-spread outputs.
constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// What a fill of kRandomTableEntries elements or more is made from.
struct RandomTable {
  std::vector<uint8_t> entries;  // kRandomTableEntries values of the dtype
  uint64_t key = 0;              // element i is entries[SplitMix64(key + i) & 0xffff], signed
};
RandomTable MakeRandomTable(DType dtype, uint64_t seed);

// Fills `count` elements of `data` (host memory) with the values of `seed`;
// fills of millions of elements split across up to 8 threads.
void FillRandom(DType dtype, void* data, size_t count, uint64_t seed);

}  // namespace arbiter
