#include "engine/postgres_verdict_store.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/pg_change_feed.h"
#include "engine/pg_connection.h"
#include "engine/pg_leases.h"
#include "engine/pg_pool.h"
#include "engine/pg_schema.h"
#include "engine/verdict_rows.h"

namespace arbiter {
namespace {

using verdict_rows::KeyText;
using verdict_rows::kOp;

// A verdict's columns (0-12) and, per result, its result's (13-24; NULL when it has
// none): one statement, so the verdict and its results are one snapshot.
constexpr char kVerdictSelect[] = R"sql(
SELECT v.fingerprint, v.dtype, v.bucket, v.candidates, v.winner, v.winner_version, v.source,
       v.reason, v.measured_dtype, v.measured_m, v.measured_n, v.measured_k, v.created_unix,
       r.ordinal, r.name, r.version, r.tier, r.determinism, r.state, r.reason,
       r.median_seconds, r.spread, r.samples, r.max_abs_error, r.max_rel_error
FROM arbiter.verdicts v LEFT JOIN arbiter.verdict_results r
  ON r.fingerprint = v.fingerprint AND r.op = v.op AND r.dtype = v.dtype AND r.bucket = v.bucket
)sql";
constexpr int kFirstResultColumn = 13;

// The verdicts (alias v) of $1 (fingerprint) and $2 (op) narrowed by each of $3 (dtype),
// $4 (a bucket: its own verdict and its scoped ones, keyed "bucket/scope") and $5 (a
// candidate raced) that is not NULL.
constexpr char kVerdictScope[] = R"sql(
WHERE v.fingerprint = $1 AND v.op = $2
  AND ($3::text IS NULL OR v.dtype = $3)
  AND ($4::text IS NULL OR v.bucket = $4
       OR substr(v.bucket, 1, length($4::text) + 1) = ($4::text || '/'))
  AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM arbiter.verdict_results x
        WHERE x.fingerprint = v.fingerprint AND x.op = v.op AND x.dtype = v.dtype
          AND x.bucket = v.bucket AND x.name = $5))
)sql";

// Byte order, not the database's locale, so listings come out as SQLite's do.
constexpr char kVerdictOrder[] =
    R"sql(ORDER BY v.dtype COLLATE "C", v.bucket COLLATE "C", r.ordinal)sql";

constexpr char kForceSelect[] =
    "SELECT fingerprint, dtype, bucket, candidate, reason, created_unix FROM arbiter.forces ";

// A row of a PgResult as verdict_rows reads it.
class PgRow {
 public:
  PgRow(const PgResult& result, int row) : result_(result), row_(row) {}
  std::string Text(int col) const { return result_.Text(row_, col); }
  absl::StatusOr<int64_t> Int(int col) const { return result_.Int(row_, col); }
  absl::StatusOr<double> Real(int col) const { return result_.Real(row_, col); }

 private:
  const PgResult& result_;
  int row_;
};

// A row of verdict_rows as bound parameters.
std::vector<PgValue> PgValues(const std::vector<verdict_rows::Value>& row) {
  std::vector<PgValue> out;
  out.reserve(row.size());
  for (const verdict_rows::Value& value : row) {
    if (const auto* text = std::get_if<std::string>(&value)) {
      out.push_back(*text);
    } else if (const auto* integer = std::get_if<int64_t>(&value)) {
      out.push_back(PgInt(*integer));
    } else {
      out.push_back(PgReal(std::get<double>(value)));
    }
  }
  return out;
}

// Rows of kVerdictSelect, ordered by verdict then ordinal, folded into verdicts.
absl::StatusOr<std::vector<Verdict>> ReadVerdicts(const PgResult& r) {
  std::vector<Verdict> verdicts;
  for (int row = 0; row < r.rows(); ++row) {
    ASSIGN_OR_RETURN(Verdict v, verdict_rows::ReadVerdict(PgRow(r, row)));
    if (verdicts.empty() || verdicts.back().dtype != v.dtype ||
        verdicts.back().bucket != v.bucket || !(verdicts.back().scope == v.scope)) {
      verdicts.push_back(std::move(v));
    }
    if (!r.IsNull(row, kFirstResultColumn)) {
      // Past the ordinal.
      ASSIGN_OR_RETURN(CandidateResult result,
                       verdict_rows::ReadResult(PgRow(r, row), kFirstResultColumn + 1));
      verdicts.back().results.push_back(std::move(result));
    }
  }
  return verdicts;
}

PgValue OptionalText(const std::optional<std::string>& text) { return text; }
PgValue OptionalDType(const std::optional<DType>& d) {
  return d ? PgValue(std::string(DTypeName(*d))) : std::nullopt;
}
PgValue OptionalBucket(const std::optional<Bucket>& b) {
  return b ? PgValue(b->ToString()) : std::nullopt;
}

// What a write to (fingerprint, dtype, bucket) tells peers; unset dtype or bucket: every one.
StoreChange ChangeOf(StoreChange::What what, const std::string& fingerprint,
                     std::optional<DType> dtype = std::nullopt,
                     std::optional<Bucket> bucket = std::nullopt) {
  StoreChange change;
  change.what = what;
  change.fingerprint = fingerprint;
  change.dtype = dtype;
  change.bucket = std::move(bucket);
  return change;
}

std::string DefaultOrigin() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown-host");
  return absl::StrCat(host, ":", getpid());
}

absl::StatusOr<std::string> ReadPasswordFile(const std::string& path) {
  std::ifstream in(path);
  std::string password;
  if (!in || !std::getline(in, password)) {
    return absl::FailedPreconditionError(
        absl::StrCat("store password file ", path, ": cannot read a line from it"));
  }
  absl::StripTrailingAsciiWhitespace(&password);
  if (password.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("store password file ", path, ": the first line is empty"));
  }
  return password;
}

absl::Status WithContext(const absl::Status& s, const std::string& context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

}  // namespace

// ---------------------------------------------------------------------------
// Opening, health, writes.

absl::StatusOr<std::unique_ptr<PostgresVerdictStore>> PostgresVerdictStore::Open(
    const std::string& uri, const StoreOptions& options) {
  const std::string describe = RedactStoreLocation(uri);
  if (!IsPostgresUri(uri)) {
    return absl::InvalidArgumentError(
        absl::StrCat("store: expected a postgresql:// or postgres:// URI, got ", describe));
  }
  if (options.connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("store connections: expected >= 1, got ", options.connections));
  }
  // Defaults first, the URI next (its own settings win over the defaults), the password
  // file last (it wins over everything).
  PgParams params = {
      {"connect_timeout", absl::StrCat(options.connect_timeout_seconds)},
      {"application_name", "arbiterd"},
      {"client_encoding", "UTF8"},
      // A server that vanished without closing the connection is noticed in ~25 s, not hours.
      {"keepalives", "1"},
      {"keepalives_idle", "10"},
      {"keepalives_interval", "5"},
      {"keepalives_count", "3"},
      {"tcp_user_timeout", "25000"},
      // Every float8 printed exactly, so a stored figure comes back bit for bit.
      {"options", "-c extra_float_digits=3"},
      {"dbname", uri},
  };
  if (!options.password_file.empty()) {
    ASSIGN_OR_RETURN(std::string password, ReadPasswordFile(options.password_file));
    params.emplace_back("password", std::move(password));
  }
  auto connector = std::make_shared<PgConnector>(
      params, describe,
      std::chrono::milliseconds(static_cast<int64_t>(options.reconnect_interval_seconds * 1000)));
  ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> first, connector->Connect());

  RETURN_IF_ERROR(
      WithContext(pg_schema::Migrate(*first), absl::StrCat("verdict store ", describe)));
  auto pool = std::make_unique<PgPool>(connector, std::move(first), options.connections);

  std::unique_ptr<PostgresVerdictStore> store(
      new PostgresVerdictStore(describe, options.origin.empty() ? DefaultOrigin() : options.origin,
                               connector, std::move(pool)));

  absl::StatusOr<std::unique_ptr<PgChangeFeed>> feed = PgChangeFeed::Start(
      std::move(params), std::chrono::seconds(options.connect_timeout_seconds));
  RETURN_IF_ERROR(
      WithContext(feed.status(), absl::StrCat("verdict store ", describe, ": notifications")));
  store->feed_ = std::move(*feed);
  return store;
}

PostgresVerdictStore::PostgresVerdictStore(std::string describe, std::string origin,
                                           std::shared_ptr<PgConnector> connector,
                                           std::unique_ptr<PgPool> pool)
    : describe_(std::move(describe)),
      origin_(std::move(origin)),
      connector_(connector),
      pool_(std::move(pool)),
      leases_(std::make_unique<PgLeases>(connector)) {}

PostgresVerdictStore::~PostgresVerdictStore() {
  feed_.reset();  // no deliveries from here on
}

absl::Status PostgresVerdictStore::Health() {
  absl::Status reached = pool_->WithConnection(
      [](PgConnection& conn) { return conn.Exec("health check", "SELECT 1").status(); });
  if (!reached.ok()) return absl::UnavailableError(reached.message());
  if (!feed_->connected()) {
    return absl::UnavailableError(absl::StrCat(
        "verdict store ", describe_, ": the notification connection is down (reconnecting)"));
  }
  return absl::OkStatus();
}

int PostgresVerdictStore::schema_version() const {
  // Read through a connection of its own: this is for logs and tests, not a hot path.
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = connector_->Connect();
  if (!conn.ok()) return 0;
  return pg_schema::Version(**conn);
}

absl::StatusOr<int64_t> PostgresVerdictStore::Write(
    const std::string& op, const StoreChange& change,
    const std::function<absl::StatusOr<int64_t>(PgConnection&)>& write) {
  int64_t changed = 0;
  RETURN_IF_ERROR(pool_->WithConnection([&](PgConnection& conn) -> absl::Status {
    PgTransaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(op));
    ASSIGN_OR_RETURN(changed, write(conn));
    if (changed > 0) {
      StoreChange stamped = change;
      stamped.origin = origin_;
      RETURN_IF_ERROR(PgChangeFeed::Notify(conn, stamped, op));
    }
    return txn.Commit(op);
  }));
  return changed;
}

// ---------------------------------------------------------------------------
// Leases and notifications.

std::unique_ptr<StoreSubscription> PostgresVerdictStore::Subscribe(
    std::function<void(const StoreChange&)> on_change) {
  return feed_->Subscribe(std::move(on_change));
}

absl::StatusOr<std::unique_ptr<StoreLease>> PostgresVerdictStore::TryLease(
    const std::string& fingerprint, DType dtype, const Bucket& bucket, const VerdictScope& scope) {
  return leases_->TryLease(fingerprint, dtype, bucket, scope);
}

// ---------------------------------------------------------------------------
// Verdicts.

absl::Status PostgresVerdictStore::PutVerdict(const Verdict& v) {
  RETURN_IF_ERROR(CheckPutVerdict(v));
  const std::string op = absl::StrCat("put verdict ", KeyText(v.fingerprint, v.dtype, v.bucket));
  const std::string dtype(DTypeName(v.dtype));
  const std::string bucket = StoreKeyOf(v.bucket, v.scope);
  // All results in one INSERT: ($1..$16), ($17..$32), ...
  constexpr int kResultFields = 16;
  std::string insert_results =
      "INSERT INTO arbiter.verdict_results (fingerprint, op, dtype, bucket, ordinal, name, "
      "version, tier, determinism, state, reason, median_seconds, spread, samples, "
      "max_abs_error, max_rel_error) VALUES ";
  std::vector<PgValue> result_values;
  for (size_t i = 0; i < v.results.size(); ++i) {
    absl::StrAppend(&insert_results, i ? ", (" : "(");
    for (int f = 1; f <= kResultFields; ++f) {
      absl::StrAppend(&insert_results, f > 1 ? ", $" : "$", i * kResultFields + f);
    }
    absl::StrAppend(&insert_results, ")");
    for (PgValue& value : PgValues(verdict_rows::ResultRow(v, i))) {
      result_values.push_back(std::move(value));
    }
  }
  const StoreChange change = ChangeOf(StoreChange::What::kVerdicts,
                                      v.fingerprint, v.dtype, v.bucket);
  return Write(op, change, [&](PgConnection& conn) -> absl::StatusOr<int64_t> {
    // The upsert takes the row lock, so a concurrent put of the same key waits here and
    // then replaces this one's results whole, never interleaving with them.
    RETURN_IF_ERROR(
        conn.Exec(op,
                  "INSERT INTO arbiter.verdicts (fingerprint, op, dtype, bucket, candidates, "
                  "winner, winner_version, source, reason, measured_dtype, measured_m, "
                  "measured_n, measured_k, created_unix) VALUES ($1, $2, $3, $4, $5, $6, $7, "
                  "$8, $9, $10, $11, $12, $13, $14) "
                  "ON CONFLICT (fingerprint, op, dtype, bucket) DO UPDATE SET "
                  "candidates = EXCLUDED.candidates, winner = EXCLUDED.winner, "
                  "winner_version = EXCLUDED.winner_version, source = EXCLUDED.source, "
                  "reason = EXCLUDED.reason, measured_dtype = EXCLUDED.measured_dtype, "
                  "measured_m = EXCLUDED.measured_m, measured_n = EXCLUDED.measured_n, "
                  "measured_k = EXCLUDED.measured_k, created_unix = EXCLUDED.created_unix",
                  PgValues(verdict_rows::VerdictRow(v)))
            .status());
    RETURN_IF_ERROR(conn.Exec(op,
                              "DELETE FROM arbiter.verdict_results WHERE fingerprint = $1 AND "
                              "op = $2 AND dtype = $3 AND bucket = $4",
                              {v.fingerprint, std::string(kOp), dtype, bucket})
                        .status());
    if (!v.results.empty()) {
      RETURN_IF_ERROR(conn.Exec(op, insert_results.c_str(), result_values).status());
    }
    return 1;  // the row upserted: peers are told
  }).status();
}

absl::StatusOr<Verdict> PostgresVerdictStore::GetVerdict(const std::string& fingerprint,
                                                         DType dtype, const Bucket& bucket) {
  const std::string op = absl::StrCat("get verdict ", KeyText(fingerprint, dtype, bucket));
  const std::string sql = absl::StrCat(kVerdictSelect, kVerdictScope, kVerdictOrder);
  std::vector<Verdict> found;
  RETURN_IF_ERROR(pool_->WithConnection([&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult rows,
                     conn.Exec(op, sql.c_str(),
                               {fingerprint, std::string(kOp), std::string(DTypeName(dtype)),
                                bucket.ToString(), std::nullopt}));
    ASSIGN_OR_RETURN(found, ReadVerdicts(rows));
    return absl::OkStatus();
  }));
  // The scope matches the bucket's refinements and halves too: only its own is asked for.
  for (Verdict& v : found) {
    if (v.scope.whole()) return std::move(v);
  }
  return absl::NotFoundError(
      absl::StrCat("verdict store: no verdict for ", KeyText(fingerprint, dtype, bucket)));
}

absl::StatusOr<std::vector<Verdict>> PostgresVerdictStore::ListVerdicts(
    const std::string& fingerprint, const VerdictFilter& filter) {
  const std::string op = absl::StrCat("list verdicts of ", fingerprint);
  const std::string sql = absl::StrCat(kVerdictSelect, kVerdictScope, kVerdictOrder);
  std::vector<Verdict> found;
  RETURN_IF_ERROR(pool_->WithConnection([&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult rows,
                     conn.Exec(op, sql.c_str(),
                               {fingerprint, std::string(kOp), OptionalDType(filter.dtype),
                                OptionalBucket(filter.bucket), OptionalText(filter.candidate)}));
    ASSIGN_OR_RETURN(found, ReadVerdicts(rows));
    return absl::OkStatus();
  }));
  return found;
}

absl::StatusOr<int64_t> PostgresVerdictStore::CountVerdicts(const std::string& fingerprint) {
  const std::string op = absl::StrCat("count verdicts of ", fingerprint);
  int64_t count = 0;
  RETURN_IF_ERROR(pool_->WithConnection([&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult rows, conn.Exec(op,
                                              "SELECT count(*) FROM arbiter.verdicts "
                                              "WHERE fingerprint = $1 AND op = $2",
                                              {fingerprint, std::string(kOp)}));
    ASSIGN_OR_RETURN(count, rows.Int(0, 0));
    return absl::OkStatus();
  }));
  return count;
}

absl::StatusOr<int> PostgresVerdictStore::Invalidate(const std::string& fingerprint,
                                                     const InvalidateScope& scope) {
  RETURN_IF_ERROR(CheckInvalidateScope(scope));
  const std::string op = absl::StrCat("invalidate verdicts of ", fingerprint);
  const std::string sql = absl::StrCat("DELETE FROM arbiter.verdicts v ", kVerdictScope);
  // A candidate alone: every dtype and bucket may have lost one.
  const StoreChange change = ChangeOf(StoreChange::What::kVerdicts,
                                      fingerprint, scope.dtype, scope.bucket);
  const auto erase = [&](PgConnection& conn) -> absl::StatusOr<int64_t> {
    // Counts the verdict rows only: the cascaded result rows are not counted.
    ASSIGN_OR_RETURN(PgResult erased,
                     conn.Exec(op, sql.c_str(),
                               {fingerprint, std::string(kOp), OptionalDType(scope.dtype),
                                OptionalBucket(scope.bucket), OptionalText(scope.candidate)}));
    return erased.affected();
  };
  ASSIGN_OR_RETURN(const int64_t removed, Write(op, change, erase));
  return static_cast<int>(removed);
}

// ---------------------------------------------------------------------------
// Forces.

absl::Status PostgresVerdictStore::PutForce(const Force& f) {
  RETURN_IF_ERROR(CheckPutForce(f));
  const std::string op = absl::StrCat("put force ", KeyText(f.fingerprint, f.dtype, f.bucket));
  const StoreChange change = ChangeOf(StoreChange::What::kForces, f.fingerprint, f.dtype, f.bucket);
  return Write(op, change, [&](PgConnection& conn) -> absl::StatusOr<int64_t> {
    RETURN_IF_ERROR(
        conn.Exec(op,
                  "INSERT INTO arbiter.forces (fingerprint, dtype, bucket, candidate, reason, "
                  "created_unix) VALUES ($1, $2, $3, $4, $5, $6) "
                  "ON CONFLICT (fingerprint, dtype, bucket) DO UPDATE SET "
                  "candidate = EXCLUDED.candidate, reason = EXCLUDED.reason, "
                  "created_unix = EXCLUDED.created_unix",
                  {f.fingerprint, std::string(DTypeName(f.dtype)), StoreKeyOf(f.bucket, f.scope),
                   f.candidate, f.reason, PgInt(f.created_unix)})
            .status());
    return 1;  // the row upserted: peers are told
  }).status();
}

absl::StatusOr<std::optional<Force>> PostgresVerdictStore::GetForce(const std::string& fingerprint,
                                                                    DType dtype,
                                                                    const Bucket& bucket) {
  const std::string op = absl::StrCat("get force ", KeyText(fingerprint, dtype, bucket));
  const std::string sql =
      absl::StrCat(kForceSelect, "WHERE fingerprint = $1 AND dtype = $2 AND bucket = $3");
  std::optional<Force> found;
  RETURN_IF_ERROR(pool_->WithConnection([&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult rows,
                     conn.Exec(op, sql.c_str(),
                               {fingerprint, std::string(DTypeName(dtype)), bucket.ToString()}));
    if (rows.rows() > 0) {
      ASSIGN_OR_RETURN(found, verdict_rows::ReadForce(PgRow(rows, 0)));
    }
    return absl::OkStatus();
  }));
  return found;
}

absl::StatusOr<bool> PostgresVerdictStore::RemoveForce(const std::string& fingerprint, DType dtype,
                                                       const Bucket& bucket,
                                                       const VerdictScope& scope) {
  const std::string op = absl::StrCat("remove force ", KeyText(fingerprint, dtype, bucket));
  const StoreChange change = ChangeOf(StoreChange::What::kForces, fingerprint, dtype, bucket);
  const auto erase = [&](PgConnection& conn) -> absl::StatusOr<int64_t> {
    ASSIGN_OR_RETURN(PgResult erased,
                     conn.Exec(op,
                               "DELETE FROM arbiter.forces WHERE fingerprint = $1 AND "
                               "dtype = $2 AND bucket = $3",
                               {fingerprint, std::string(DTypeName(dtype)),
                                StoreKeyOf(bucket, scope)}));
    return erased.affected();
  };
  ASSIGN_OR_RETURN(const int64_t removed, Write(op, change, erase));
  return removed > 0;
}

absl::StatusOr<std::vector<Force>> PostgresVerdictStore::ListForces(
    const std::string& fingerprint) {
  const std::string op = absl::StrCat("list forces of ", fingerprint);
  const std::string sql = absl::StrCat(
      kForceSelect, "WHERE fingerprint = $1 ORDER BY dtype COLLATE \"C\", bucket COLLATE \"C\"");
  std::vector<Force> forces;
  RETURN_IF_ERROR(pool_->WithConnection([&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult rows, conn.Exec(op, sql.c_str(), {fingerprint}));
    forces.clear();
    for (int row = 0; row < rows.rows(); ++row) {
      ASSIGN_OR_RETURN(Force f, verdict_rows::ReadForce(PgRow(rows, row)));
      forces.push_back(std::move(f));
    }
    return absl::OkStatus();
  }));
  return forces;
}

// ---------------------------------------------------------------------------
// Quarantine.

absl::Status PostgresVerdictStore::PutQuarantine(const QuarantineEntry& q) {
  RETURN_IF_ERROR(CheckPutQuarantine(q));
  const std::string op =
      absl::StrCat("put quarantine ", q.candidate, " ", q.scope, " on ", q.fingerprint);
  const StoreChange change = ChangeOf(StoreChange::What::kQuarantine, q.fingerprint);
  return Write(op, change, [&](PgConnection& conn) -> absl::StatusOr<int64_t> {
    RETURN_IF_ERROR(
        conn.Exec(op,
                  "INSERT INTO arbiter.quarantine (candidate, version, scope, fingerprint, "
                  "reason, created_unix) VALUES ($1, $2, $3, $4, $5, $6) "
                  "ON CONFLICT (candidate, scope, fingerprint) DO UPDATE SET "
                  "version = EXCLUDED.version, reason = EXCLUDED.reason, "
                  "created_unix = EXCLUDED.created_unix",
                  {q.candidate, PgInt(q.version), q.scope, q.fingerprint, q.reason,
                   PgInt(q.created_unix)})
            .status());
    return 1;  // the row upserted: peers are told
  }).status();
}

absl::StatusOr<std::vector<QuarantineEntry>> PostgresVerdictStore::ListQuarantine(
    const std::string& fingerprint) {
  const std::string op = absl::StrCat("list quarantine of ", fingerprint);
  std::vector<QuarantineEntry> entries;
  RETURN_IF_ERROR(pool_->WithConnection([&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult rows,
                     conn.Exec(op,
                               "SELECT candidate, version, scope, fingerprint, reason, "
                               "created_unix FROM arbiter.quarantine WHERE fingerprint = $1 "
                               "ORDER BY candidate COLLATE \"C\", scope COLLATE \"C\"",
                               {fingerprint}));
    entries.clear();
    for (int row = 0; row < rows.rows(); ++row) {
      ASSIGN_OR_RETURN(QuarantineEntry q, verdict_rows::ReadQuarantine(PgRow(rows, row)));
      entries.push_back(std::move(q));
    }
    return absl::OkStatus();
  }));
  return entries;
}

absl::StatusOr<int> PostgresVerdictStore::ClearQuarantine(const std::string& fingerprint,
                                                          const std::string& candidate) {
  const std::string op = absl::StrCat("clear quarantine of ", fingerprint);
  const StoreChange change = ChangeOf(StoreChange::What::kQuarantine, fingerprint);
  const auto erase = [&](PgConnection& conn) -> absl::StatusOr<int64_t> {
    ASSIGN_OR_RETURN(PgResult erased,
                     conn.Exec(op,
                               "DELETE FROM arbiter.quarantine WHERE fingerprint = $1 "
                               "AND ($2::text IS NULL OR candidate = $2)",
                               {fingerprint, candidate.empty() ? PgValue() : PgValue(candidate)}));
    return erased.affected();
  };
  ASSIGN_OR_RETURN(const int64_t removed, Write(op, change, erase));
  return static_cast<int>(removed);
}

}  // namespace arbiter
