// Quarantine: candidates withheld from serving on this device, each for a scope
// (everywhere, one dtype, or one dtype's bucket) and with the evidence. The
// verdict store keeps the entries; this class keeps the device's entries in
// memory with their scopes parsed once, when loaded or added, and answers "is
// this candidate quarantined for this problem?" on every selection without
// reading the store or comparing text.
//
// On a shared store another daemon may change the entries: MarkStale (from a
// change notification) makes the next Refresh re-read them; while the store
// cannot be reached the last entries read stay in force. A node-local entry
// (Reach::kNode) is held in memory alone, until this daemon restarts.
//
// Ownership: borrows the store, which must outlive it; never owns its observer.
// Thread-safe: provides internal synchronization (one mutex over the entries).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/bucket.h"
#include "engine/candidate.h"
#include "engine/observer.h"
#include "engine/status.h"
#include "engine/verdict_store.h"

namespace arbiter {

// Where a quarantine applies. Its text form, as stored and on the wire, is "*"
// (everywhere on this device), a dtype name ("bf16") or "dtype/bucket"
// ("f32/m(32,64]a8.n(32,64]a8.k(32,64]a8").
struct QuarantineScope {
  std::optional<DType> dtype;    // unset: every dtype
  std::optional<Bucket> bucket;  // set only with dtype: that dtype's bucket alone

  static QuarantineScope Everywhere() { return {}; }
  static QuarantineScope OfDType(DType dtype) { return {dtype, std::nullopt}; }
  static QuarantineScope OfBucket(const BucketKey& key) { return {key.dtype, key.bucket}; }
  // INVALID_ARGUMENT naming the three accepted forms when `text` is none of them.
  static absl::StatusOr<QuarantineScope> Parse(std::string_view text);

  bool everywhere() const { return !dtype.has_value(); }
  // Whether a problem of `dtype` in `bucket` falls inside this scope.
  bool Covers(DType dtype, const Bucket& bucket) const;
  std::string ToString() const;
  bool operator==(const QuarantineScope&) const = default;
};

class Quarantine {
 public:
  // A stored entry with its scope parsed.
  struct Entry {
    QuarantineEntry record;
    QuarantineScope scope;
  };

  // Loads the entries of `fingerprint` from `store`.
  static absl::StatusOr<std::unique_ptr<Quarantine>> Create(VerdictStore& store,
                                                            std::string fingerprint);
  Quarantine(const Quarantine&) = delete;
  Quarantine& operator=(const Quarantine&) = delete;

  // Set before the engine serves; not synchronized.
  void set_observer(ArbiterObserver* observer) { observer_ = observer; }

  // Stores an entry for `candidate` at `version` (fleet: in the store, refused when it
  // cannot be written; node: in memory) and applies it at once.
  absl::Status Add(const std::string& candidate, int version, const QuarantineScope& scope,
                   const std::string& reason, Reach reach = Reach::kFleet);
  // Removes `candidate`'s entries of that reach, or every one when empty. Returns the
  // number removed.
  absl::StatusOr<int> Clear(const std::string& candidate, Reach reach = Reach::kFleet);
  // The node-local entries, then the stored ones read from the store.
  absl::StatusOr<std::vector<QuarantineEntry>> List() const;

  // The store's entries changed: re-read them at the next Refresh.
  void MarkStale() { stale_ = true; }
  // Re-reads the store's entries when marked stale; keeps the last ones (and stays
  // stale) when the store cannot answer.
  void Refresh();

  // Whether `c` (an entry's version 0 matches every version) is quarantined for
  // problems of `dtype` in `bucket`.
  bool Covers(const CandidateSpec& c, DType dtype, const Bucket& bucket) const;
  // The entries that name `c`, any scope.
  std::vector<Entry> EntriesFor(const CandidateSpec& c) const;

 private:
  Quarantine(VerdictStore& store, std::string fingerprint)
      : store_(store), fingerprint_(std::move(fingerprint)) {}
  // Re-reads the store's entries (it is the record; this is its parsed copy).
  absl::Status Reload();

  VerdictStore& store_;
  const std::string fingerprint_;
  ArbiterObserver* observer_ = nullptr;
  std::atomic<bool> stale_{false};
  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);       // the store's, as last read
  std::vector<Entry> node_entries_ ABSL_GUARDED_BY(mu_);  // this daemon's alone
};

}  // namespace arbiter
