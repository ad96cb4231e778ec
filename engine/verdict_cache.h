// Verdicts kept in memory in front of the verdict store, keyed by (dtype,
// bucket) on one device. Bounded: past `capacity` entries the least recently
// used is evicted. The store holds every verdict, so a miss or an eviction costs
// one store read, never a wrong answer.
//
// When the store may have changed unseen (a shared store's notifications were
// lost while it was unreachable), the entries are marked unconfirmed rather than
// dropped: Get skips them, so the store is read again, but Held still returns
// them - what this daemon serves while the store cannot be read.
//
// It also keeps the serving generation: a number that moves whenever anything a
// selection depends on changes in this process (a verdict stored, the cache
// cleared, a force or a quarantine changed: Invalidate), so answers remembered
// under an older generation (SelectionCache) are never served.
//
// Ownership: holds copies of the verdicts it was given.
// Thread-safe: provides internal synchronization (one mutex over the entries).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/bucket.h"
#include "engine/verdict.h"

namespace arbiter {

class VerdictCache {
 public:
  // `capacity` 0 caches nothing.
  explicit VerdictCache(size_t capacity) : capacity_(capacity) {}
  VerdictCache(const VerdictCache&) = delete;
  VerdictCache& operator=(const VerdictCache&) = delete;

  // The cached verdict for `key`, now the most recently used; nullopt on a miss or
  // when the entry is unconfirmed.
  std::optional<Verdict> Get(const BucketKey& key);
  // The entry for `key`, confirmed or not; nullopt when there is none.
  std::optional<Verdict> Held(const BucketKey& key);
  // Inserts or replaces `key`'s verdict (confirmed), evicting the least recently
  // used past capacity.
  void Put(const BucketKey& key, const Verdict& verdict);
  // Drops `key`'s entry, if any (the store has no verdict for it).
  void Drop(const BucketKey& key);
  void Clear();
  // Every entry unconfirmed until Put again (the store may have changed unseen).
  void MarkUnconfirmed();
  // Drops every entry whose key `stale` accepts (another daemon changed it in the store).
  void DropIf(const std::function<bool(const BucketKey&)>& stale);
  size_t size() const;

  // Moves the generation without touching the entries (a force or quarantine changed).
  void Invalidate() { generation_.fetch_add(1, std::memory_order_acq_rel); }
  // Read before deciding a selection that may be remembered under it.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    Verdict verdict;
    bool confirmed = true;  // false: served only by Held, until Put again
  };
  using Entries = std::list<std::pair<BucketKey, Entry>>;  // most recently used first

  const size_t capacity_;
  std::atomic<uint64_t> generation_{0};
  mutable absl::Mutex mu_;
  Entries entries_ ABSL_GUARDED_BY(mu_);
  std::map<BucketKey, Entries::iterator> index_ ABSL_GUARDED_BY(mu_);
};

}  // namespace arbiter
