// Splits [0, count) into up to max_threads contiguous parts of at least
// `per_thread` items each (fewer parts where there are fewer items) and calls
// `fn(part, begin, end)` for each: part 0 on the calling thread, the others on
// threads of their own, joined before it returns. Parts ascend with `part`, so
// per-part results merged in part order are the results of one serial pass.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace arbiter {

// How many parts ParallelFor splits `count` items into.
inline size_t ParallelParts(size_t count, size_t per_thread, size_t max_threads = 8) {
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  return std::max<size_t>(
      1, std::min({hardware, max_threads, (count + per_thread - 1) / std::max<size_t>(per_thread, 1)}));
}

template <typename Fn>
void ParallelFor(size_t count, size_t per_thread, Fn fn, size_t max_threads = 8) {
  const size_t parts = ParallelParts(count, per_thread, max_threads);
  const size_t chunk = (count + parts - 1) / parts;
  std::vector<std::thread> workers;
  workers.reserve(parts - 1);
  for (size_t t = 1; t < parts; ++t) {
    workers.emplace_back(fn, t, std::min(count, t * chunk), std::min(count, (t + 1) * chunk));
  }
  fn(size_t{0}, size_t{0}, std::min(count, chunk));
  for (std::thread& w : workers) w.join();
}

}  // namespace arbiter
