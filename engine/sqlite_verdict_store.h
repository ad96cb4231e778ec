// The embedded store: verdicts, forces and quarantine entries in one SQLite
// file (WAL mode), for one daemon. The schema is versioned: a new file gets the
// current schema; a store written under any other schema version is refused
// (FAILED_PRECONDITION naming both versions) - no migration exists yet, since
// version 1 is the first.
//
// Not shared: leases are exclusive within this object only (the daemon's own
// single flight), and no change notifications are sent - there is no other
// daemon to tell.
//
// Thread-safe: provides internal synchronization (one connection, one mutex).
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/verdict_store.h"

struct sqlite3;

namespace arbiter {

class SqliteVerdictStore final : public VerdictStore {
 public:
  static constexpr int kSchemaVersion = 1;

  // Opens or creates the store at `path` (":memory:" for a private in-memory one).
  // A file that fails PRAGMA quick_check (a damaged page) is refused with DATA_LOSS
  // naming SQLite's finding, and left as it is for the operator.
  static absl::StatusOr<std::unique_ptr<SqliteVerdictStore>> Open(const std::string& path);
  ~SqliteVerdictStore() override;

  std::string Describe() const override { return path_; }
  bool shared() const override { return false; }
  int schema_version() const override;
  absl::Status Health() override { return absl::OkStatus(); }

  absl::Status PutVerdict(const Verdict& v) override;
  absl::StatusOr<Verdict> GetVerdict(const std::string& fingerprint, DType dtype,
                                     const Bucket& bucket) override;
  absl::StatusOr<std::vector<Verdict>> ListVerdicts(const std::string& fingerprint,
                                                    const VerdictFilter& filter) override;
  absl::StatusOr<int64_t> CountVerdicts(const std::string& fingerprint) override;
  absl::StatusOr<int> Invalidate(const std::string& fingerprint,
                                 const InvalidateScope& scope) override;

  absl::Status PutForce(const Force& f) override;
  absl::StatusOr<std::optional<Force>> GetForce(const std::string& fingerprint, DType dtype,
                                                const Bucket& bucket) override;
  absl::StatusOr<bool> RemoveForce(const std::string& fingerprint, DType dtype,
                                   const Bucket& bucket) override;
  absl::StatusOr<std::vector<Force>> ListForces(const std::string& fingerprint) override;

  absl::Status PutQuarantine(const QuarantineEntry& q) override;
  absl::StatusOr<std::vector<QuarantineEntry>> ListQuarantine(
      const std::string& fingerprint) override;
  absl::StatusOr<int> ClearQuarantine(const std::string& fingerprint,
                                      const std::string& candidate) override;

  absl::StatusOr<std::unique_ptr<StoreLease>> TryLease(
      const std::string& fingerprint, DType dtype, const Bucket& bucket,
      const VerdictScope& scope = VerdictScope()) override;
  std::unique_ptr<StoreSubscription> Subscribe(
      std::function<void(const StoreChange&)> on_change) override;

 private:
  // The keys leased now; shared with the leases, which may outlive the store.
  struct Leases {
    std::mutex mu;
    std::set<std::string> held;  // GUARDED_BY(mu)
  };
  class Lease;

  SqliteVerdictStore(sqlite3* db, std::string path);
  absl::Status Migrate();

  const std::string path_;
  const std::shared_ptr<Leases> leases_ = std::make_shared<Leases>();
  mutable absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);  // owned
};

}  // namespace arbiter
