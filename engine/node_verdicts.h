// Verdicts this daemon keeps to itself on a shared store. An operator's
// invalidation with scope node sets aside the store's verdicts in that scope
// for this daemon only: it measures those buckets again and serves what it
// measured from here, leaving the store - and every other daemon - as they
// were. Held in memory until the daemon restarts (the store's verdicts then
// apply again) or another node-scoped invalidation covers them.
//
// Thread-safe: provides internal synchronization (one mutex).
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/bucket.h"
#include "engine/verdict.h"
#include "engine/verdict_store.h"

namespace arbiter {

class NodeVerdicts {
 public:
  NodeVerdicts() = default;
  NodeVerdicts(const NodeVerdicts&) = delete;
  NodeVerdicts& operator=(const NodeVerdicts&) = delete;

  // Sets aside the store's verdicts in `scope` from now on, and drops this daemon's
  // own verdicts in it. Returns how many of this daemon's own verdicts were dropped.
  int Invalidate(const InvalidateScope& scope);
  // Whether `key` is this daemon's to measure and keep: an invalidation covers it
  // (`stored`, the store's verdict for it if any, decides a candidate-scoped one).
  bool SetAside(const BucketKey& key, const Verdict* stored) const;
  // This daemon's own verdict for `key`, if it measured one since.
  std::optional<Verdict> Get(const BucketKey& key) const;
  void Put(const Verdict& v);
  bool empty() const;

 private:
  static bool InScope(const InvalidateScope& scope, const BucketKey& key, const Verdict* v);

  mutable absl::Mutex mu_;
  std::vector<InvalidateScope> set_aside_ ABSL_GUARDED_BY(mu_);
  std::map<BucketKey, Verdict> verdicts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace arbiter
