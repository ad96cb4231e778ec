// The shared store: verdicts, forces and quarantine entries in a PostgreSQL
// database (schema "arbiter"), for a fleet of daemons. Daemons whose device
// fingerprints match exactly share verdicts; no others do.
//
// - Schema: versioned in arbiter.meta, created or migrated in one transaction
//   on open, under a transaction-scoped advisory lock, so daemons starting
//   together migrate once. A newer schema than this build knows is refused.
// - Reads and writes: a small pool of connections (StoreOptions::connections).
//   A write and the notification it sends commit in one transaction.
// - Leases: pg_try_advisory_lock on a 64-bit hash of (fingerprint, dtype,
//   bucket), on a dedicated connection. The server releases it when that
//   connection ends, so a daemon killed while measuring blocks no one; within
//   this process the lease is exclusive by its key.
// - Notifications: NOTIFY on channel "arbiter_changes" with every change;
//   a PgListener delivers them to subscribers, and a StoreChange::kEverything
//   after it had to reconnect.
// - Availability: a lost connection is re-made on next use (at most once per
//   StoreOptions::reconnect_interval_seconds while the server is down); until
//   then calls fail UNAVAILABLE, and Health() says so.
//
// Thread-safe: provides internal synchronization.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/verdict_store.h"

namespace arbiter {

class PgConnection;
class PgConnector;
class PgListener;

class PostgresVerdictStore final : public VerdictStore {
 public:
  static constexpr int kSchemaVersion = 1;
  // The notification channel every daemon on the database LISTENs on.
  static constexpr char kChannel[] = "arbiter_changes";

  // Connects to `uri` (postgresql://...), migrates the schema and starts listening.
  // UNAVAILABLE when the server cannot be reached.
  static absl::StatusOr<std::unique_ptr<PostgresVerdictStore>> Open(const std::string& uri,
                                                                    const StoreOptions& options);
  ~PostgresVerdictStore() override;

  std::string Describe() const override { return describe_; }
  bool shared() const override { return true; }
  int schema_version() const override;
  absl::Status Health() override;
  // What this store's notifications name as their origin.
  const std::string& origin() const { return origin_; }

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
                                   const Bucket& bucket, const VerdictScope& scope) override;
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

  // The 64-bit advisory lock key of a lease (FNV-1a of the key text): the same on every
  // daemon, whatever its build.
  static int64_t LeaseKey(const std::string& fingerprint, DType dtype, const Bucket& bucket,
                          const VerdictScope& scope = VerdictScope());

 private:
  struct LeaseConnection;
  class Lease;
  struct Subscribers;
  class Subscription;

  PostgresVerdictStore(std::string describe, std::string origin,
                       std::shared_ptr<PgConnector> connector, int connections);
  absl::Status Migrate(PgConnection& conn);
  // Runs `body` on a pooled connection, connecting first when needed. When the
  // connection turns out to be lost, `body` runs once more on a new one (every body
  // is safe to repeat: a write replaces, a delete deletes what is there).
  absl::Status WithConnection(const std::function<absl::Status(PgConnection&)>& body);
  // Runs `write` in one transaction on WithConnection's terms; when it returns a count of
  // rows changed above 0, notifies kChannel of `change` inside that transaction, so peers
  // hear of a change exactly when it commits. Returns `write`'s count.
  absl::StatusOr<int64_t> Write(const std::string& op, const StoreChange& change,
                                const std::function<absl::StatusOr<int64_t>(PgConnection&)>& write);
  // Notifies kChannel of `change` inside the caller's open transaction.
  absl::Status Notify(PgConnection& conn, const StoreChange& change, const std::string& op);
  void Deliver(const std::string& payload);
  void DeliverToAll(const StoreChange& change);

  const std::string describe_;  // the URI, password redacted
  const std::string origin_;
  const std::shared_ptr<PgConnector> connector_;
  const std::shared_ptr<LeaseConnection> leases_;
  const std::shared_ptr<Subscribers> subscribers_;

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<PgConnection>> idle_;  // GUARDED_BY(pool_mu_); null: not connected

  std::unique_ptr<PgListener> listener_;  // last member: stopped first
};

}  // namespace arbiter
