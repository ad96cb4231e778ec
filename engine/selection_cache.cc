#include "engine/selection_cache.h"

namespace arbiter {

std::shared_ptr<const Selection> SelectionCache::Get(const Key& key, uint64_t generation) const {
  absl::ReaderMutexLock lock(&mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end() || it->second.generation != generation) return nullptr;
  if (std::chrono::steady_clock::now() >= it->second.expires) return nullptr;
  return it->second.selection;
}

void SelectionCache::Put(const Key& key, uint64_t generation,
                         std::shared_ptr<const Selection> selection) {
  if (capacity_ == 0) return;
  const auto expires = std::chrono::steady_clock::now() + ttl_;
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= capacity_ && !entries_.contains(key)) entries_.clear();
  entries_.insert_or_assign(key, Entry{generation, expires, std::move(selection)});
}

size_t SelectionCache::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace arbiter
