#include "engine/postgres_verdict_store.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/pg_connection.h"
#include "engine/pg_listener.h"
#include "engine/verdict_rows.h"
#include "spdlog/spdlog.h"

namespace arbiter {
namespace {

using verdict_rows::KeyText;
using verdict_rows::kOp;

// The migration's transaction-scoped advisory lock, in the two-int key space (which
// leases, in the one-bigint space, never share): "arbi", 1.
constexpr char kLockMigration[] = "SELECT pg_advisory_xact_lock(1634890345, 1)";

// Version 1, as statements (PQexecParams runs one at a time). Mirrors the SQLite
// schema: enums by their engine names, results in their own table keyed by the
// verdict, cascaded on delete. Everything lives in schema "arbiter", so a database
// shared with other applications keeps its own names.
constexpr const char* kSchemaV1[] = {
    "CREATE SCHEMA IF NOT EXISTS arbiter",
    R"sql(CREATE TABLE arbiter.meta (
  key text PRIMARY KEY,
  value text NOT NULL
))sql",
    R"sql(CREATE TABLE arbiter.verdicts (
  fingerprint text NOT NULL,
  op text NOT NULL,
  dtype text NOT NULL,
  bucket text NOT NULL,
  candidates text NOT NULL,
  winner text NOT NULL,
  winner_version integer NOT NULL,
  source text NOT NULL,
  reason text NOT NULL,
  measured_dtype text NOT NULL,
  measured_m bigint NOT NULL,
  measured_n bigint NOT NULL,
  measured_k bigint NOT NULL,
  created_unix bigint NOT NULL,
  PRIMARY KEY (fingerprint, op, dtype, bucket)
))sql",
    R"sql(CREATE TABLE arbiter.verdict_results (
  fingerprint text NOT NULL,
  op text NOT NULL,
  dtype text NOT NULL,
  bucket text NOT NULL,
  ordinal integer NOT NULL,
  name text NOT NULL,
  version integer NOT NULL,
  tier integer NOT NULL,
  determinism text NOT NULL,
  state text NOT NULL,
  reason text NOT NULL,
  median_seconds double precision NOT NULL,
  spread double precision NOT NULL,
  samples integer NOT NULL,
  max_abs_error double precision NOT NULL,
  max_rel_error double precision NOT NULL,
  PRIMARY KEY (fingerprint, op, dtype, bucket, ordinal),
  FOREIGN KEY (fingerprint, op, dtype, bucket)
    REFERENCES arbiter.verdicts (fingerprint, op, dtype, bucket) ON DELETE CASCADE
))sql",
    "CREATE INDEX verdict_results_by_candidate ON arbiter.verdict_results (fingerprint, name)",
    R"sql(CREATE TABLE arbiter.forces (
  fingerprint text NOT NULL,
  dtype text NOT NULL,
  bucket text NOT NULL,
  candidate text NOT NULL,
  reason text NOT NULL,
  created_unix bigint NOT NULL,
  PRIMARY KEY (fingerprint, dtype, bucket)
))sql",
    R"sql(CREATE TABLE arbiter.quarantine (
  candidate text NOT NULL,
  version integer NOT NULL,
  scope text NOT NULL,
  fingerprint text NOT NULL,
  reason text NOT NULL,
  created_unix bigint NOT NULL,
  PRIMARY KEY (candidate, scope, fingerprint)
))sql",
};

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

// Notification payload: format version, what, dtype or "*", bucket or "*", origin,
// fingerprint - tab-separated, the fingerprint last since it may hold anything.
constexpr char kPayloadVersion[] = "1";

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

std::string EncodeChange(const StoreChange& c) {
  std::string origin = c.origin;
  absl::StrReplaceAll({{"\t", " "}}, &origin);
  return absl::StrCat(kPayloadVersion, "\t", StoreChangeWhatName(c.what), "\t",
                      c.dtype ? DTypeName(*c.dtype) : "*", "\t",
                      c.bucket ? c.bucket->ToString() : "*", "\t", origin, "\t", c.fingerprint);
}

// A payload this build cannot read (a newer daemon's format) drops everything:
// safe, since a notification only ever says what may be stale.
StoreChange DecodeChange(const std::string& payload) {
  std::vector<std::string> parts = absl::StrSplit(payload, absl::MaxSplits('\t', 5));
  StoreChange c;
  if (parts.size() != 6 || parts[0] != kPayloadVersion) return c;
  for (StoreChange::What what :
       {StoreChange::What::kVerdicts, StoreChange::What::kForces, StoreChange::What::kQuarantine}) {
    if (parts[1] == StoreChangeWhatName(what)) c.what = what;
  }
  if (c.what == StoreChange::What::kEverything) return c;
  if (parts[2] != "*") {
    c.dtype = ParseDType(parts[2]);
    if (!c.dtype) return StoreChange{};
  }
  if (parts[3] != "*") {
    c.bucket = ParseBucket(parts[3]);
    if (!c.bucket) return StoreChange{};
  }
  c.origin = parts[4];
  c.fingerprint = parts[5];
  return c;
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
// Subscribers: callbacks registered by Subscribe, called on the listener thread.

struct PostgresVerdictStore::Subscribers {
  void Deliver(const StoreChange& change) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, callback] : callbacks) callback(change);
  }

  std::mutex mu;  // held while delivering, so a subscription's end waits for its callback
  std::map<uint64_t, std::function<void(const StoreChange&)>> callbacks;  // GUARDED_BY(mu)
  uint64_t next_id = 0;                                                   // GUARDED_BY(mu)
};

class PostgresVerdictStore::Subscription final : public StoreSubscription {
 public:
  Subscription(std::shared_ptr<Subscribers> subscribers, uint64_t id)
      : subscribers_(std::move(subscribers)), id_(id) {}
  ~Subscription() override {
    std::lock_guard<std::mutex> lock(subscribers_->mu);
    subscribers_->callbacks.erase(id_);
  }

 private:
  const std::shared_ptr<Subscribers> subscribers_;
  const uint64_t id_;
};

std::unique_ptr<StoreSubscription> PostgresVerdictStore::Subscribe(
    std::function<void(const StoreChange&)> on_change) {
  std::lock_guard<std::mutex> lock(subscribers_->mu);
  const uint64_t id = subscribers_->next_id++;
  subscribers_->callbacks.emplace(id, std::move(on_change));
  return std::make_unique<Subscription>(subscribers_, id);
}

// ---------------------------------------------------------------------------
// Leases: session advisory locks on one dedicated connection.

struct PostgresVerdictStore::LeaseConnection {
  explicit LeaseConnection(std::shared_ptr<PgConnector> c) : connector(std::move(c)) {}

  const std::shared_ptr<PgConnector> connector;
  std::mutex mu;
  std::unique_ptr<PgConnection> conn;  // GUARDED_BY(mu); null until first needed
  uint64_t generation = 0;             // GUARDED_BY(mu); connections made so far
  std::set<int64_t> held;              // GUARDED_BY(mu); keys leased in this process
};

class PostgresVerdictStore::Lease final : public StoreLease {
 public:
  Lease(std::shared_ptr<LeaseConnection> leases, int64_t key, uint64_t generation)
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
  const std::shared_ptr<LeaseConnection> leases_;
  const int64_t key_;
  const uint64_t generation_;
};

int64_t PostgresVerdictStore::LeaseKey(const std::string& fingerprint, DType dtype,
                                       const Bucket& bucket, const VerdictScope& scope) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  const std::string text = absl::StrCat(kOp, "\x1f", fingerprint, "\x1f", DTypeName(dtype), "\x1f",
                                        StoreKeyOf(bucket, scope));
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  int64_t key;
  std::memcpy(&key, &hash, sizeof(key));  // the same bits, as PostgreSQL's bigint
  return key;
}

absl::StatusOr<std::unique_ptr<StoreLease>> PostgresVerdictStore::TryLease(
    const std::string& fingerprint, DType dtype, const Bucket& bucket, const VerdictScope& scope) {
  const int64_t key = LeaseKey(fingerprint, dtype, bucket, scope);
  const std::string op = absl::StrCat("take lease on ", KeyText(fingerprint, dtype, bucket),
                                      scope.whole() ? "" : absl::StrCat(" ", scope.ToString()));
  LeaseConnection& leases = *leases_;
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
  return std::unique_ptr<StoreLease>(new Lease(leases_, key, leases.generation));
}

// ---------------------------------------------------------------------------
// Opening, the pool, health.

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

  std::unique_ptr<PostgresVerdictStore> store(
      new PostgresVerdictStore(describe, options.origin.empty() ? DefaultOrigin() : options.origin,
                               connector, options.connections));
  RETURN_IF_ERROR(WithContext(store->Migrate(*first), absl::StrCat("verdict store ", describe)));
  store->idle_.push_back(std::move(first));
  while (static_cast<int>(store->idle_.size()) < options.connections)
    store->idle_.push_back(nullptr);

  PgListenerOptions listen;
  listen.channel = kChannel;
  listen.connect_timeout = std::chrono::seconds(options.connect_timeout_seconds);
  listen.on_notify = [subscribers = store->subscribers_](const std::string& payload) {
    subscribers->Deliver(DecodeChange(payload));
  };
  listen.on_resync = [subscribers = store->subscribers_] { subscribers->Deliver(StoreChange{}); };
  absl::StatusOr<std::unique_ptr<PgListener>> listener =
      PgListener::Start(std::move(params), std::move(listen));
  RETURN_IF_ERROR(
      WithContext(listener.status(), absl::StrCat("verdict store ", describe, ": notifications")));
  store->listener_ = std::move(*listener);
  return store;
}

PostgresVerdictStore::PostgresVerdictStore(std::string describe, std::string origin,
                                           std::shared_ptr<PgConnector> connector, int connections)
    : describe_(std::move(describe)),
      origin_(std::move(origin)),
      connector_(connector),
      leases_(std::make_shared<LeaseConnection>(connector)),
      subscribers_(std::make_shared<Subscribers>()) {
  idle_.reserve(static_cast<size_t>(connections));
}

PostgresVerdictStore::~PostgresVerdictStore() {
  listener_.reset();  // no deliveries from here on
}

absl::Status PostgresVerdictStore::Migrate(PgConnection& conn) {
  PgTransaction txn(conn);
  RETURN_IF_ERROR(txn.Begin("migrate"));
  // Daemons starting together wait here for the first one's migration to commit.
  RETURN_IF_ERROR(conn.Exec("migrate: lock", kLockMigration).status());
  ASSIGN_OR_RETURN(PgResult exists, conn.Exec("migrate: find meta",
                                              "SELECT to_regclass('arbiter.meta') IS NOT NULL"));
  if (exists.Text(0, 0) != "t") {
    for (const char* statement : kSchemaV1) {
      RETURN_IF_ERROR(conn.Exec("migrate: create schema", statement).status());
    }
    RETURN_IF_ERROR(conn.Exec("migrate: record schema_version",
                              "INSERT INTO arbiter.meta (key, value) VALUES ('schema_version', $1)",
                              {PgInt(kSchemaVersion)})
                        .status());
  } else {
    ASSIGN_OR_RETURN(PgResult found,
                     conn.Exec("migrate: read schema_version",
                               "SELECT value FROM arbiter.meta WHERE key = 'schema_version'"));
    if (found.rows() != 1) {
      return absl::DataLossError("arbiter.meta holds no schema_version");
    }
    ASSIGN_OR_RETURN(const int64_t version, found.Int(0, 0));
    if (version > kSchemaVersion) {
      // A newer arbiterd wrote it; reading it with this schema could misread or destroy
      // what that version knows.
      return absl::FailedPreconditionError(absl::StrCat("the store has schema_version ", version,
                                                        ", newer than this build's schema_version ",
                                                        kSchemaVersion, "; refusing to open it"));
    }
    if (version < kSchemaVersion) {
      // Migrations from older versions go here, one step per version; version 1 is the first.
      return absl::FailedPreconditionError(absl::StrCat(
          "the store has schema_version ", version, ", older than any this build (schema_version ",
          kSchemaVersion, ") migrates from"));
    }
  }
  return txn.Commit("migrate");
}

absl::Status PostgresVerdictStore::WithConnection(
    const std::function<absl::Status(PgConnection&)>& body) {
  std::unique_ptr<PgConnection> conn;
  {
    std::unique_lock<std::mutex> lock(pool_mu_);
    pool_cv_.wait(lock, [this] { return !idle_.empty(); });
    conn = std::move(idle_.back());
    idle_.pop_back();
  }
  absl::Status status;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (conn == nullptr || !conn->StillUp()) {
      conn.reset();
      absl::StatusOr<std::unique_ptr<PgConnection>> fresh = connector_->Connect();
      if (!fresh.ok()) {
        status = fresh.status();
        break;
      }
      conn = std::move(*fresh);
    }
    status = body(*conn);
    if (!conn->broken()) break;  // answered, well or not
    conn.reset();                // lost mid-call: once more on a new connection
  }
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    idle_.push_back(std::move(conn));
  }
  pool_cv_.notify_one();
  return status;
}

absl::Status PostgresVerdictStore::Health() {
  absl::Status reached = WithConnection(
      [](PgConnection& conn) { return conn.Exec("health check", "SELECT 1").status(); });
  if (!reached.ok()) return absl::UnavailableError(reached.message());
  if (!listener_->connected()) {
    return absl::UnavailableError(absl::StrCat(
        "verdict store ", describe_, ": the notification connection is down (reconnecting)"));
  }
  return absl::OkStatus();
}

int PostgresVerdictStore::schema_version() const {
  // Read through a connection of its own: this is for logs and tests, not a hot path.
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = connector_->Connect();
  if (!conn.ok()) return 0;
  absl::StatusOr<PgResult> found = (*conn)->Exec(
      "read schema_version", "SELECT value FROM arbiter.meta WHERE key = 'schema_version'");
  if (!found.ok() || found->rows() != 1) return 0;
  absl::StatusOr<int64_t> version = found->Int(0, 0);
  return version.ok() ? static_cast<int>(*version) : 0;
}

absl::StatusOr<int64_t> PostgresVerdictStore::Write(
    const std::string& op, const StoreChange& change,
    const std::function<absl::StatusOr<int64_t>(PgConnection&)>& write) {
  int64_t changed = 0;
  RETURN_IF_ERROR(WithConnection([&](PgConnection& conn) -> absl::Status {
    PgTransaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(op));
    ASSIGN_OR_RETURN(changed, write(conn));
    if (changed > 0) RETURN_IF_ERROR(Notify(conn, change, op));
    return txn.Commit(op);
  }));
  return changed;
}

absl::Status PostgresVerdictStore::Notify(PgConnection& conn, const StoreChange& change,
                                          const std::string& op) {
  StoreChange stamped = change;
  stamped.origin = origin_;
  return conn
      .Exec(absl::StrCat(op, ": notify"), "SELECT pg_notify($1, $2)",
            {std::string(kChannel), EncodeChange(stamped)})
      .status();
}

// ---------------------------------------------------------------------------
// Verdicts.

absl::Status PostgresVerdictStore::PutVerdict(const Verdict& v) {
  if (v.fingerprint.empty()) {
    return absl::InvalidArgumentError("verdict store: put verdict: empty device fingerprint");
  }
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
  RETURN_IF_ERROR(WithConnection([&](PgConnection& conn) -> absl::Status {
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
  RETURN_IF_ERROR(WithConnection([&](PgConnection& conn) -> absl::Status {
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
  RETURN_IF_ERROR(WithConnection([&](PgConnection& conn) -> absl::Status {
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
  // Set fields narrow the scope; with none set, `all` must say so explicitly.
  const bool narrowed = scope.candidate || scope.dtype || scope.bucket;
  if (!narrowed && !scope.all) {
    return absl::InvalidArgumentError(
        "verdict store: invalidate: empty scope; name a candidate, dtype or bucket, or set all");
  }
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
  if (f.fingerprint.empty() || f.candidate.empty()) {
    return absl::InvalidArgumentError(
        "verdict store: put force: fingerprint and candidate must be set");
  }
  RETURN_IF_ERROR(CheckForceScope(f));
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
  RETURN_IF_ERROR(WithConnection([&](PgConnection& conn) -> absl::Status {
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
  RETURN_IF_ERROR(WithConnection([&](PgConnection& conn) -> absl::Status {
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
  if (q.fingerprint.empty() || q.candidate.empty() || q.scope.empty()) {
    return absl::InvalidArgumentError(
        "verdict store: put quarantine: fingerprint, candidate and scope must be set");
  }
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
  RETURN_IF_ERROR(WithConnection([&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult rows,
                     conn.Exec(op,
                               "SELECT candidate, version, scope, fingerprint, reason, "
                               "created_unix FROM arbiter.quarantine WHERE fingerprint = $1 "
                               "ORDER BY candidate COLLATE \"C\", scope COLLATE \"C\"",
                               {fingerprint}));
    entries.clear();
    for (int row = 0; row < rows.rows(); ++row) {
      QuarantineEntry q;
      q.candidate = rows.Text(row, 0);
      ASSIGN_OR_RETURN(int64_t version, rows.Int(row, 1));
      q.version = static_cast<int>(version);
      q.scope = rows.Text(row, 2);
      q.fingerprint = rows.Text(row, 3);
      q.reason = rows.Text(row, 4);
      ASSIGN_OR_RETURN(q.created_unix, rows.Int(row, 5));
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
