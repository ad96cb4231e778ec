// The shared store: verdicts, forces and quarantine entries in a PostgreSQL
// database (schema "arbiter"), for a fleet of daemons. Daemons whose device
// fingerprints match exactly share verdicts; no others do.
//
// - Schema: versioned in arbiter.meta, created or migrated on open, once for
//   daemons starting together (pg_schema). A newer schema than this build knows
//   is refused.
// - Reads and writes: a small pool of connections (PgPool, StoreOptions::connections).
//   A write and the notification it sends commit in one transaction.
// - Leases: pg_try_advisory_lock on a dedicated connection (PgLeases).
// - Notifications: NOTIFY on channel "arbiter_changes" with every change, and
//   LISTEN for every daemon's (PgChangeFeed).
// - Availability: a lost connection is re-made on next use (at most once per
//   StoreOptions::reconnect_interval_seconds while the server is down); until
//   then calls fail UNAVAILABLE, and Health() says so.
//
// Thread-safe: provides internal synchronization.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/pg_schema.h"
#include "engine/verdict_store.h"

namespace arbiter {

class PgChangeFeed;
class PgConnection;
class PgConnector;
class PgLeases;
class PgPool;

class PostgresVerdictStore final : public VerdictStore {
 public:
  static constexpr int kSchemaVersion = pg_schema::kVersion;

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

 private:
  PostgresVerdictStore(std::string describe, std::string origin,
                       std::shared_ptr<PgConnector> connector, std::unique_ptr<PgPool> pool);
  // Runs `write` in one transaction on PgPool::WithConnection's terms; when it returns a
  // count of rows changed above 0, notifies peers of `change` inside that transaction, so
  // they hear of a change exactly when it commits. Returns `write`'s count.
  absl::StatusOr<int64_t> Write(const std::string& op, const StoreChange& change,
                                const std::function<absl::StatusOr<int64_t>(PgConnection&)>& write);

  const std::string describe_;  // the URI, password redacted
  const std::string origin_;
  const std::shared_ptr<PgConnector> connector_;
  const std::unique_ptr<PgPool> pool_;
  const std::unique_ptr<PgLeases> leases_;

  std::unique_ptr<PgChangeFeed> feed_;  // last member: stopped first
};

}  // namespace arbiter
