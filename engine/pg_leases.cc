#include "engine/pg_leases.h"

#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/pg_connection.h"
#include "engine/verdict_rows.h"
#include "spdlog/spdlog.h"

namespace arbiter {

struct PgLeases::Connection {
  explicit Connection(std::shared_ptr<PgConnector> c) : connector(std::move(c)) {}

  const std::shared_ptr<PgConnector> connector;
  std::mutex mu;
  std::unique_ptr<PgConnection> conn;  // GUARDED_BY(mu); null until first needed
  uint64_t generation = 0;             // GUARDED_BY(mu); connections made so far
  std::set<int64_t> held;              // GUARDED_BY(mu); keys leased in this process
};

class PgLeases::Lease final : public StoreLease {
 public:
  Lease(std::shared_ptr<Connection> leases, int64_t key, uint64_t generation)
      : leases_(std::move(leases)), key_(key), generation_(generation) {}

  ~Lease() override {
    std::lock_guard<std::mutex> lock(leases_->mu);
    leases_->held.erase(key_);
    // On a newer connection the lock is already gone (the server dropped it with the old one).
    if (leases_->conn == nullptr || leases_->generation != generation_ || leases_->conn->broken()) {
      return;
    }
    absl::StatusOr<PgResult> released = leases_->conn->Exec(
        "release lease", "SELECT pg_advisory_unlock($1::bigint)", {PgInt(key_)});
    if (!released.ok()) spdlog::warn("{}", released.status().ToString());
  }

 private:
  const std::shared_ptr<Connection> leases_;
  const int64_t key_;
  const uint64_t generation_;
};

PgLeases::PgLeases(std::shared_ptr<PgConnector> connector)
    : connection_(std::make_shared<Connection>(std::move(connector))) {}

PgLeases::~PgLeases() = default;

int64_t PgLeases::Key(const std::string& fingerprint, DType dtype, const Bucket& bucket,
                      const VerdictScope& scope) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  const std::string text = absl::StrCat(verdict_rows::kOp, "\x1f", fingerprint, "\x1f",
                                        DTypeName(dtype), "\x1f", StoreKeyOf(bucket, scope));
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  int64_t key;
  std::memcpy(&key, &hash, sizeof(key));  // the same bits, as PostgreSQL's bigint
  return key;
}

absl::StatusOr<std::unique_ptr<StoreLease>> PgLeases::TryLease(const std::string& fingerprint,
                                                               DType dtype, const Bucket& bucket,
                                                               const VerdictScope& scope) {
  const int64_t key = Key(fingerprint, dtype, bucket, scope);
  const std::string op =
      absl::StrCat("take lease on ", verdict_rows::KeyText(fingerprint, dtype, bucket),
                   scope.whole() ? "" : absl::StrCat(" ", scope.ToString()));
  Connection& leases = *connection_;
  std::lock_guard<std::mutex> lock(leases.mu);
  // A session lock is re-entrant within its session, so this process's own holders are
  // kept apart here.
  if (leases.held.count(key) != 0) return std::unique_ptr<StoreLease>();
  absl::StatusOr<PgResult> taken = absl::UnavailableError("not tried");
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (leases.conn == nullptr || !leases.conn->StillUp()) {
      leases.conn.reset();
      ASSIGN_OR_RETURN(leases.conn, leases.connector->Connect());
      ++leases.generation;
    }
    taken = leases.conn->Exec(op, "SELECT pg_try_advisory_lock($1::bigint)", {PgInt(key)});
    if (taken.ok() || !leases.conn->broken()) break;
    leases.conn.reset();  // lost between calls: once more on a new connection
  }
  RETURN_IF_ERROR(taken.status());
  if (taken->rows() != 1 || taken->Text(0, 0) != "t") return std::unique_ptr<StoreLease>();
  leases.held.insert(key);
  return std::unique_ptr<StoreLease>(new Lease(connection_, key, leases.generation));
}

}  // namespace arbiter
