// Counts how often each exact shape is served from a verdict measured at another
// shape, to find the shapes worth a verdict of their own (refinement.h). Bounded:
// past `capacity` distinct shapes the counts start again from zero, so a stream
// of ever-new shapes costs memory `capacity` and never refines anything it
// should not.
//
// Thread-safe: provides internal synchronization (one mutex over the counts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/problem.h"

namespace arbiter {

class HotShapes {
 public:
  // `threshold` 0 counts nothing: Count returns 0.
  HotShapes(int64_t threshold, size_t capacity) : threshold_(threshold), capacity_(capacity) {}
  HotShapes(const HotShapes&) = delete;
  HotShapes& operator=(const HotShapes&) = delete;

  // Counts one use of `p` and returns its uses counted so far, this one included
  // (0 when counting is off): `p` is hot when that reaches the threshold.
  int64_t Count(const Problem& p);
  // Forgets `p`, so that it can become hot again (its refinement was invalidated or failed).
  void Forget(const Problem& p);

 private:
  using Key = std::tuple<DType, int64_t, int64_t, int64_t>;

  const int64_t threshold_;
  const size_t capacity_;
  absl::Mutex mu_;
  std::map<Key, int64_t> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace arbiter
