#include "engine/random_fill.h"

#include <random>

#include "engine/parallel_for.h"

namespace arbiter {

namespace {

// Draws `n` values into `out` from `rng`: N(0, 0.5^2), never zero, also after
// rounding (a tiny draw is 0 in f16).
void Draw(DType dtype, std::mt19937_64& rng, void* out, size_t n) {
  std::normal_distribution<double> normal(0.0, 0.5);
  for (size_t i = 0; i < n; ++i) {
    double v = normal(rng);
    if (v == 0.0) v = 0.25;
    StoreFromDouble(dtype, out, i, v);
    if (LoadAsDouble(dtype, out, i) == 0.0) StoreFromDouble(dtype, out, i, 0.25);
  }
}

// Elements [begin, end) of `out` from the table, as the header describes.
template <typename Bits>
void FillFromTable(const RandomTable& table, void* out, size_t begin, size_t end) {
  const Bits* entries = reinterpret_cast<const Bits*>(table.entries.data());
  Bits* x = static_cast<Bits*>(out);
  constexpr Bits kSign = Bits{1} << (8 * sizeof(Bits) - 1);
  for (size_t i = begin; i < end; ++i) {
    const uint64_t h = SplitMix64(table.key + i);
    x[i] = entries[h & 0xffff] ^ (((h >> 16) & 1) ? kSign : Bits{0});
  }
}

}  // namespace

RandomTable MakeRandomTable(DType dtype, uint64_t seed) {
  RandomTable table;
  table.entries.resize(kRandomTableEntries * ElementSize(dtype));
  std::mt19937_64 rng(seed);
  Draw(dtype, rng, table.entries.data(), kRandomTableEntries);
  table.key = SplitMix64(seed ^ 0x2545f4914f6cdd1dull);
  return table;
}

void FillRandom(DType dtype, void* data, size_t count, uint64_t seed) {
  // One draw from the generator costs ~25-50 ns: seconds for the operands of one
  // 8192^3 bucket. Past the table's size, each element is a hash and a load instead.
  if (count < kRandomTableEntries) {
    std::mt19937_64 rng(seed);
    Draw(dtype, rng, data, count);
    return;
  }
  const RandomTable table = MakeRandomTable(dtype, seed);
  // Threads only where the fill is long enough to pay for them.
  ParallelFor(count, size_t{1} << 22, [&](size_t, size_t begin, size_t end) {
    switch (ElementSize(dtype)) {
      case 2: FillFromTable<uint16_t>(table, data, begin, end); return;
      case 4: FillFromTable<uint32_t>(table, data, begin, end); return;
      case 8: FillFromTable<uint64_t>(table, data, begin, end); return;
    }
  });
}

}  // namespace arbiter
