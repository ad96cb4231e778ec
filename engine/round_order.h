// The order in which a timing round takes its samples, shared by the engine's
// Measurer and the nvcc-built transformer bench (header-only, standard library
// alone).
#pragma once

#include <cstddef>
#include <numeric>
#include <vector>

namespace arbiter {

// The order of round `round`'s samples among `n` entrants: a permutation of
// 0..n-1 that starts at round % n and steps by a stride coprime with n that
// changes from round to round, so each entrant goes first once every n rounds
// and (for n >= 3) follows different entrants in different rounds. A fixed
// rotation kept every entrant behind the same one, and whatever that one left
// on the device, or in the host's caches, landed on it alone.
inline std::vector<size_t> RoundOrder(size_t n, int round) {
  std::vector<size_t> order;
  if (n == 0) return order;
  std::vector<size_t> strides;  // the units mod n, in increasing order
  for (size_t s = 1; s < n; ++s) {
    if (std::gcd(s, n) == 1) strides.push_back(s);
  }
  if (strides.empty()) strides.push_back(0);  // n == 1
  const size_t r = round > 0 ? static_cast<size_t>(round) : 0;
  const size_t stride = strides[r % strides.size()];
  order.reserve(n);
  for (size_t j = 0; j < n; ++j) order.push_back((r + j * stride) % n);
  return order;
}

}  // namespace arbiter
