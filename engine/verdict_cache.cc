#include "engine/verdict_cache.h"

#include "absl/cleanup/cleanup.h"

namespace arbiter {

std::optional<Verdict> VerdictCache::Get(const BucketKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end() || !it->second->second.confirmed) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->second.verdict;
}

std::optional<Verdict> VerdictCache::Held(const BucketKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return it->second->second.verdict;
}

// The generation moves after each change is made, so a reader that saw the new
// generation also sees the change.
void VerdictCache::Put(const BucketKey& key, const Verdict& verdict) {
  absl::Cleanup invalidate = [this] { Invalidate(); };
  if (capacity_ == 0) return;
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    it->second->second = Entry{verdict};
    entries_.splice(entries_.begin(), entries_, it->second);
    return;
  }
  if (entries_.size() >= capacity_) {
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
  entries_.emplace_front(key, Entry{verdict});
  index_[key] = entries_.begin();
}

void VerdictCache::Drop(const BucketKey& key) {
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return;
    entries_.erase(it->second);
    index_.erase(it);
  }
  Invalidate();
}

void VerdictCache::MarkUnconfirmed() {
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, entry] : entries_) entry.confirmed = false;
  }
  Invalidate();
}

void VerdictCache::Clear() {
  {
    absl::MutexLock lock(&mu_);
    index_.clear();
    entries_.clear();
  }
  Invalidate();
}

void VerdictCache::DropIf(const std::function<bool(const BucketKey&)>& stale) {
  {
    absl::MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (stale(it->first)) {
        index_.erase(it->first);
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  Invalidate();
}

size_t VerdictCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace arbiter
