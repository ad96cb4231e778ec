#include "engine/node_verdicts.h"

#include <algorithm>

namespace arbiter {

bool NodeVerdicts::InScope(const InvalidateScope& scope, const BucketKey& key, const Verdict* v) {
  if (scope.dtype && *scope.dtype != key.dtype) return false;
  if (scope.bucket && *scope.bucket != key.bucket) return false;
  if (!scope.candidate) return true;
  return v != nullptr && v->Result(*scope.candidate) != nullptr;
}

int NodeVerdicts::Invalidate(const InvalidateScope& scope) {
  absl::MutexLock lock(&mu_);
  int dropped = 0;
  for (auto it = verdicts_.begin(); it != verdicts_.end();) {
    if (InScope(scope, it->first, &it->second)) {
      it = verdicts_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  set_aside_.push_back(scope);
  return dropped;
}

bool NodeVerdicts::SetAside(const BucketKey& key, const Verdict* stored) const {
  absl::MutexLock lock(&mu_);
  return std::any_of(set_aside_.begin(), set_aside_.end(),
                     [&](const InvalidateScope& s) { return InScope(s, key, stored); });
}

std::optional<Verdict> NodeVerdicts::Get(const BucketKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = verdicts_.find(key);
  if (it == verdicts_.end()) return std::nullopt;
  return it->second;
}

void NodeVerdicts::Put(const Verdict& v) {
  absl::MutexLock lock(&mu_);
  verdicts_[BucketKey{v.dtype, v.bucket}] = v;
}

bool NodeVerdicts::empty() const {
  absl::MutexLock lock(&mu_);
  return set_aside_.empty() && verdicts_.empty();
}

}  // namespace arbiter
