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

size_t HotShapes::ForgetHot(const std::function<bool(const BucketKey&)>& covered) {
  absl::MutexLock lock(&mu_);
  size_t forgotten = 0;
  for (auto it = counts_.begin(); it != counts_.end();) {
    const auto& [dtype, m, n, k] = it->first;
    if (it->second >= threshold_ && covered(BucketKeyOf(Problem{dtype, m, n, k}))) {
      it = counts_.erase(it);
      ++forgotten;
    } else {
      ++it;
    }
  }
  return forgotten;
}

}  // namespace arbiter
