// The answers to Selects that a stored verdict or a force decided, kept so the
// next identical Select is a lookup: no store read, no lock that measurement or
// dispatch hold, no strings built. Keyed by the exact problem and the required
// determinism (candidates' coverage can split a bucket, so the bucket alone is
// not enough); the tuning policy plays no part in such answers.
//
// Staleness: every entry is tagged with the generation it was decided under
// (VerdictCache::generation(), which moves on every verdict stored, force,
// invalidation and quarantine change in this process) and answers only while
// that generation is current. Entries also expire after `ttl`, which bounds how
// long a change made by another daemon sharing the store goes unseen.
//
// Bounded: past `capacity` entries the cache starts over empty (a refill costs
// one slow Select per key).
//
// Ownership: holds shared references to the selections it was given.
// Thread-safe: provides internal synchronization (a reader-writer mutex; Get
// takes it shared).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "engine/contract.h"
#include "engine/problem.h"
#include "engine/selection.h"

namespace arbiter {

class SelectionCache {
 public:
  struct Key {
    Problem problem;
    Determinism required = Determinism::kNondeterministic;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), static_cast<int>(k.problem.dtype), k.problem.m, k.problem.n,
                        k.problem.k, static_cast<int>(k.required));
    }
  };

  // `capacity` 0 caches nothing.
  SelectionCache(size_t capacity, std::chrono::steady_clock::duration ttl)
      : capacity_(capacity), ttl_(ttl) {}
  SelectionCache(const SelectionCache&) = delete;
  SelectionCache& operator=(const SelectionCache&) = delete;

  // The selection for `key` decided under `generation`, if it is still fresh.
  std::shared_ptr<const Selection> Get(const Key& key, uint64_t generation) const;
  // Remembers `selection` for `key`, decided under `generation`.
  void Put(const Key& key, uint64_t generation, std::shared_ptr<const Selection> selection);
  size_t size() const;

 private:
  struct Entry {
    uint64_t generation = 0;
    std::chrono::steady_clock::time_point expires;
    std::shared_ptr<const Selection> selection;
  };

  const size_t capacity_;
  const std::chrono::steady_clock::duration ttl_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace arbiter
