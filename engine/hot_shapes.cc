#include "engine/hot_shapes.h"

namespace arbiter {

int64_t HotShapes::Count(const Problem& p) {
  if (threshold_ <= 0) return 0;
  const Key key{p.dtype, p.m, p.n, p.k};
  absl::MutexLock lock(&mu_);
  auto it = counts_.find(key);
  if (it == counts_.end()) {
    if (counts_.size() >= capacity_) counts_.clear();
    it = counts_.emplace(key, 0).first;
  }
  return ++it->second;
}

void HotShapes::Forget(const Problem& p) {
  absl::MutexLock lock(&mu_);
  counts_.erase(Key{p.dtype, p.m, p.n, p.k});
}

}  // namespace arbiter
