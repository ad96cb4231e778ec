// Forces: an operator's pins of a (dtype, bucket) to a candidate on this
// device. A fleet-wide force lives in the verdict store, so every daemon with
// the same fingerprint applies it; a node-local one lives in this daemon's
// memory alone, until it restarts, and wins over a fleet-wide one for its
// bucket.
//
// Every selection asks for the force of its bucket, so the store's forces are
// held here: loaded at start, re-read when the store reports a change
// (MarkStale, from a change notification), and served as last read while the
// store cannot be reached. A fleet-wide change is made in the store first and
// applied here only once it is durable; when the store refuses it, nothing
// changes and the caller gets the store's error.
//
// Ownership: borrows the store, which must outlive it.
// Thread-safe: provides internal synchronization (one mutex over the tables).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/bucket.h"
#include "engine/status.h"
#include "engine/verdict_store.h"

namespace arbiter {

class Forces {
 public:
  struct Entry {
    Force force;
    Reach reach = Reach::kFleet;
  };

  // Loads the forces of `fingerprint` from `store`.
  static absl::StatusOr<std::unique_ptr<Forces>> Create(VerdictStore& store,
                                                        std::string fingerprint);
  Forces(const Forces&) = delete;
  Forces& operator=(const Forces&) = delete;

  // The force that applies to `key`: node-local first, then fleet-wide. Re-reads the
  // store's forces first when a change was reported since the last read.
  std::optional<Force> Get(const BucketKey& key);
  // Fleet: written to the store (its error when it cannot be), then applied here.
  absl::Status Put(const Force& force, Reach reach);
  // Whether a force of that scope was removed.
  absl::StatusOr<bool> Remove(const BucketKey& key, Reach reach);
  // Node-local forces, then the store's, read now (its error when it cannot answer).
  absl::StatusOr<std::vector<Entry>> List();

  // The store's forces changed: re-read them before the next answer.
  void MarkStale() { stale_ = true; }

 private:
  Forces(VerdictStore& store, std::string fingerprint)
      : store_(store), fingerprint_(std::move(fingerprint)) {}
  // Re-reads the store's forces; keeps the last ones when the store cannot answer.
  absl::Status Reload();

  VerdictStore& store_;
  const std::string fingerprint_;
  std::atomic<bool> stale_{false};
  absl::Mutex mu_;
  std::map<BucketKey, Force> fleet_ ABSL_GUARDED_BY(mu_);  // the store's, as last read
  std::map<BucketKey, Force> node_ ABSL_GUARDED_BY(mu_);
};

}  // namespace arbiter
