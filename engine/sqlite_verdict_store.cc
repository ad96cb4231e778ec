#include "engine/sqlite_verdict_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/verdict_rows.h"

namespace arbiter {
namespace {

using verdict_rows::KeyText;
using verdict_rows::kOp;

// How long a writer waits for another connection's lock before giving up.
constexpr int kBusyTimeoutMs = 5000;

// Version 1. Enums are stored by their engine names ("bf16", "timed", ...), never
// by number, so the file reads the same to a person and survives enum reordering.
constexpr char kSchema[] = R"sql(
CREATE TABLE meta (
  key TEXT PRIMARY KEY NOT NULL,
  value NOT NULL
);
CREATE TABLE verdicts (
  fingerprint TEXT NOT NULL,
  op TEXT NOT NULL,
  dtype TEXT NOT NULL,
  bucket TEXT NOT NULL,
  candidates TEXT NOT NULL,
  winner TEXT NOT NULL,
  winner_version INTEGER NOT NULL,
  source TEXT NOT NULL,
  reason TEXT NOT NULL,
  measured_dtype TEXT NOT NULL,
  measured_m INTEGER NOT NULL,
  measured_n INTEGER NOT NULL,
  measured_k INTEGER NOT NULL,
  created_unix INTEGER NOT NULL,
  PRIMARY KEY (fingerprint, op, dtype, bucket)
);
CREATE TABLE verdict_results (
  fingerprint TEXT NOT NULL,
  op TEXT NOT NULL,
  dtype TEXT NOT NULL,
  bucket TEXT NOT NULL,
  ordinal INTEGER NOT NULL,
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  tier INTEGER NOT NULL,
  determinism TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  median_seconds REAL,
  spread REAL,
  samples INTEGER NOT NULL,
  max_abs_error REAL,
  max_rel_error REAL,
  PRIMARY KEY (fingerprint, op, dtype, bucket, ordinal),
  FOREIGN KEY (fingerprint, op, dtype, bucket)
    REFERENCES verdicts (fingerprint, op, dtype, bucket) ON DELETE CASCADE
);
CREATE INDEX verdict_results_by_candidate ON verdict_results (fingerprint, name);
CREATE TABLE forces (
  fingerprint TEXT NOT NULL,
  dtype TEXT NOT NULL,
  bucket TEXT NOT NULL,
  candidate TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_unix INTEGER NOT NULL,
  PRIMARY KEY (fingerprint, dtype, bucket)
);
CREATE TABLE quarantine (
  candidate TEXT NOT NULL,
  version INTEGER NOT NULL,
  scope TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_unix INTEGER NOT NULL,
  PRIMARY KEY (candidate, scope, fingerprint)
);
)sql";

constexpr char kVerdictColumns[] =
    "SELECT fingerprint, dtype, bucket, candidates, winner, winner_version, source, reason, "
    "measured_dtype, measured_m, measured_n, measured_k, created_unix FROM verdicts ";

// The verdicts of ?1 (fingerprint) and ?2 (op) narrowed by each of ?3 (dtype),
// ?4 (bucket) and ?5 (a candidate raced) that is bound; NULL matches everything.
constexpr char kVerdictScope[] =
    "WHERE fingerprint = ?1 AND op = ?2 "
    "AND (?3 IS NULL OR dtype = ?3) "
    "AND (?4 IS NULL OR bucket = ?4 OR substr(bucket, 1, length(?4) + 1) = (?4 || '/')) "
    "AND (?5 IS NULL OR EXISTS (SELECT 1 FROM verdict_results r "
    "  WHERE r.fingerprint = verdicts.fingerprint AND r.op = verdicts.op "
    "  AND r.dtype = verdicts.dtype AND r.bucket = verdicts.bucket AND r.name = ?5)) ";

absl::Status SqliteError(sqlite3* db, int rc, const std::string& op) {
  // sqlite3_errmsg(nullptr) is "out of memory", the one way open leaves no handle.
  std::string message = absl::StrCat("verdict store: ", op, ": ", sqlite3_errmsg(db));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(message);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// Runs constant SQL (no values: those are always bound through a Statement).
absl::Status Exec(sqlite3* db, const std::string& op, const char* sql) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : SqliteError(db, rc, op);
}

// One prepared statement, finalized on destruction. Parameters and columns are
// numbered as SQLite numbers them: parameters from 1, columns from 0. A failed
// bind is remembered and reported by the next Step, so call sites bind in a row.
class Statement {
 public:
  static absl::StatusOr<Statement> Prepare(sqlite3* db, std::string op, const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt,
                                      nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return SqliteError(db, rc, op);
    }
    return Statement(db, std::move(op), stmt);
  }

  Statement(Statement&& other) noexcept
      : db_(other.db_),
        op_(std::move(other.op_)),
        stmt_(std::exchange(other.stmt_, nullptr)),
        bind_status_(std::move(other.bind_status_)) {}
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  Statement& BindText(int i, std::string_view text) {
    return Check(sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()),
                                   SQLITE_TRANSIENT));
  }
  Statement& BindInt(int i, int64_t value) { return Check(sqlite3_bind_int64(stmt_, i, value)); }
  // NaN is stored as NULL by SQLite; ReadReal turns it back into NaN.
  Statement& BindReal(int i, double value) { return Check(sqlite3_bind_double(stmt_, i, value)); }
  Statement& BindNull(int i) { return Check(sqlite3_bind_null(stmt_, i)); }
  Statement& BindOptionalText(int i, const std::optional<std::string>& text) {
    return text ? BindText(i, *text) : BindNull(i);
  }
  // ?1..?N from a row of verdict_rows.
  Statement& BindRow(const std::vector<verdict_rows::Value>& row) {
    for (size_t i = 0; i < row.size(); ++i) {
      const int at = static_cast<int>(i) + 1;
      std::visit(
          [&](const auto& value) {
            using V = std::decay_t<decltype(value)>;
            if constexpr (std::is_same_v<V, std::string>) {
              BindText(at, value);
            } else if constexpr (std::is_same_v<V, int64_t>) {
              BindInt(at, value);
            } else {
              BindReal(at, value);
            }
          },
          row[i]);
    }
    return *this;
  }

  // True with a row to read, false when done.
  absl::StatusOr<bool> Step() {
    RETURN_IF_ERROR(bind_status_);
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, op_);
  }
  // Steps a statement that returns no rows.
  absl::Status Run() {
    ASSIGN_OR_RETURN(bool row, Step());
    (void)row;
    return Reset();
  }
  // Ready to bind and step again.
  absl::Status Reset() {
    sqlite3_reset(stmt_);  // repeats the last step's error, already reported
    sqlite3_clear_bindings(stmt_);
    return absl::OkStatus();
  }

  std::string ReadText(int col) const {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return text ? std::string(text, sqlite3_column_bytes(stmt_, col)) : std::string();
  }
  int64_t ReadInt(int col) const { return sqlite3_column_int64(stmt_, col); }
  double ReadReal(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    return sqlite3_column_double(stmt_, col);
  }
  int changes() const { return sqlite3_changes(db_); }

 private:
  Statement(sqlite3* db, std::string op, sqlite3_stmt* stmt)
      : db_(db), op_(std::move(op)), stmt_(stmt) {}

  Statement& Check(int rc) {
    if (rc != SQLITE_OK && bind_status_.ok()) bind_status_ = SqliteError(db_, rc, op_);
    return *this;
  }

  sqlite3* db_;
  std::string op_;
  sqlite3_stmt* stmt_;
  absl::Status bind_status_;
};

// BEGIN IMMEDIATE ... COMMIT; rolled back on destruction unless committed.
// IMMEDIATE takes the write lock up front, so a transaction never fails halfway
// on a lock upgrade after another connection has written.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  ~Transaction() {
    if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  absl::Status Begin(const std::string& op) { return Start(op, "BEGIN IMMEDIATE"); }
  // A read snapshot: takes no write lock, so it never blocks another writer.
  absl::Status BeginRead(const std::string& op) { return Start(op, "BEGIN DEFERRED"); }
  absl::Status Commit(const std::string& op) {
    RETURN_IF_ERROR(Exec(db_, absl::StrCat(op, ": commit"), "COMMIT"));
    open_ = false;
    return absl::OkStatus();
  }

 private:
  absl::Status Start(const std::string& op, const char* begin) {
    RETURN_IF_ERROR(Exec(db_, absl::StrCat(op, ": begin"), begin));
    open_ = true;
    return absl::OkStatus();
  }

  sqlite3* db_;
  bool open_ = false;
};

// The schema_version in meta; nullopt for a store with no meta table (a new file).
absl::StatusOr<std::optional<int64_t>> ReadSchemaVersion(sqlite3* db) {
  ASSIGN_OR_RETURN(Statement has_meta,
                   Statement::Prepare(db, "read schema_version",
                                      "SELECT 1 FROM sqlite_master "
                                      "WHERE type = 'table' AND name = 'meta'"));
  ASSIGN_OR_RETURN(bool exists, has_meta.Step());
  if (!exists) return std::nullopt;
  ASSIGN_OR_RETURN(Statement read, Statement::Prepare(db, "read schema_version",
                                                      "SELECT value FROM meta "
                                                      "WHERE key = 'schema_version'"));
  ASSIGN_OR_RETURN(bool found, read.Step());
  if (!found) {
    return absl::DataLossError("verdict store: meta table holds no schema_version");
  }
  return read.ReadInt(0);
}

// A result row as verdict_rows reads it.
class SqliteRow {
 public:
  explicit SqliteRow(const Statement& stmt) : stmt_(stmt) {}
  std::string Text(int col) const { return stmt_.ReadText(col); }
  absl::StatusOr<int64_t> Int(int col) const { return stmt_.ReadInt(col); }
  absl::StatusOr<double> Real(int col) const { return stmt_.ReadReal(col); }

 private:
  const Statement& stmt_;
};

// Fills v.results, in the order they were put. `query` is prepared from
// kResultsQuery and reused across verdicts.
constexpr char kResultsQuery[] =
    "SELECT name, version, tier, determinism, state, reason, median_seconds, spread, samples, "
    "max_abs_error, max_rel_error FROM verdict_results "
    "WHERE fingerprint = ?1 AND op = ?2 AND dtype = ?3 AND bucket = ?4 ORDER BY ordinal";

absl::Status LoadResults(Statement& query, Verdict& v) {
  query.BindText(1, v.fingerprint)
      .BindText(2, kOp)
      .BindText(3, DTypeName(v.dtype))
      .BindText(4, StoreKeyOf(v.bucket, v.scope));
  while (true) {
    ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(CandidateResult r, verdict_rows::ReadResult(SqliteRow(query), 0));
    v.results.push_back(std::move(r));
  }
  return query.Reset();
}

// Binds ?3..?5 of kVerdictScope.
void BindScope(Statement& stmt, const std::optional<DType>& dtype,
               const std::optional<Bucket>& bucket, const std::optional<std::string>& candidate) {
  if (dtype) {
    stmt.BindText(3, DTypeName(*dtype));
  } else {
    stmt.BindNull(3);
  }
  if (bucket) {
    stmt.BindText(4, bucket->ToString());
  } else {
    stmt.BindNull(4);
  }
  stmt.BindOptionalText(5, candidate);
}

constexpr char kForceColumns[] =
    "SELECT fingerprint, dtype, bucket, candidate, reason, created_unix FROM forces ";

// PRAGMA quick_check: every page of every b-tree well formed and every record
// within its page (integrity_check's cross-checks of indexes against tables are
// left out: quick_check reads each page once, milliseconds for a store of
// thousands of verdicts). DATA_LOSS with SQLite's first finding otherwise.
absl::Status CheckIntegrity(sqlite3* db, const std::string& op) {
  ASSIGN_OR_RETURN(Statement check, Statement::Prepare(db, op, "PRAGMA quick_check(1)"));
  const absl::StatusOr<bool> row = check.Step();
  std::string finding = !row.ok() ? std::string(row.status().message())
                        : *row    ? check.ReadText(0)
                                  : std::string("no result");
  if (finding == "ok") return absl::OkStatus();
  std::replace(finding.begin(), finding.end(), '\n', ' ');
  return absl::DataLossError(absl::StrCat(
      "verdict store: ", op, ": PRAGMA quick_check found a damaged file (", finding,
      "); refusing to serve from it. Move the file and its -wal and -shm aside (arbiterd then "
      "starts on an empty store) or restore it from a backup"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteVerdictStore>> SqliteVerdictStore::Open(
    const std::string& path) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  // The store owns the handle from here: SQLite returns one to close even on failure.
  std::unique_ptr<SqliteVerdictStore> store(new SqliteVerdictStore(db, path));
  const std::string op = absl::StrCat("open ", path);
  if (rc != SQLITE_OK) return SqliteError(db, rc, op);

  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  // Without foreign keys, deleting a verdict would orphan its results.
  RETURN_IF_ERROR(Exec(db, op, "PRAGMA foreign_keys = ON"));
  {
    ASSIGN_OR_RETURN(Statement check, Statement::Prepare(db, op, "PRAGMA foreign_keys"));
    ASSIGN_OR_RETURN(bool row, check.Step());
    if (!row || check.ReadInt(0) != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("verdict store: ", op, ": this SQLite does not enforce foreign keys"));
    }
  }
  const bool in_memory = path == ":memory:" || path.empty();
  if (!in_memory) {
    // WAL: readers (ListVerdicts from the admin service) never block the tuner's
    // writes, and a crash mid-write leaves the last committed state.
    ASSIGN_OR_RETURN(Statement wal, Statement::Prepare(db, op, "PRAGMA journal_mode = WAL"));
    ASSIGN_OR_RETURN(bool row, wal.Step());
    const std::string mode = row ? wal.ReadText(0) : std::string();
    if (mode != "wal") {
      return absl::FailedPreconditionError(absl::StrCat(
          "verdict store: ", op, ": journal_mode is \"", mode,
          "\", not wal (WAL needs a local filesystem with shared memory)"));
    }
    // In WAL mode NORMAL cannot corrupt the file; a power cut may lose the last
    // verdicts, which are re-measured.
    RETURN_IF_ERROR(Exec(db, op, "PRAGMA synchronous = NORMAL"));
  }

  // Found here rather than by the first request that reads the damaged page: a
  // daemon on a store it cannot trust does not start, so never says SERVING.
  RETURN_IF_ERROR(CheckIntegrity(db, op));

  absl::Status migrated = store->Migrate();
  if (!migrated.ok()) {
    return absl::Status(migrated.code(), absl::StrCat(op, ": ", migrated.message()));
  }
  return store;
}

SqliteVerdictStore::SqliteVerdictStore(sqlite3* db, std::string path)
    : path_(std::move(path)), db_(db) {}

SqliteVerdictStore::~SqliteVerdictStore() {
  // Every statement is finalized by its owner, so this closes at once (and
  // checkpoints the WAL into the main file).
  sqlite3_close_v2(db_);
}

absl::Status SqliteVerdictStore::Migrate() {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.Begin("migrate"));
  ASSIGN_OR_RETURN(std::optional<int64_t> found, ReadSchemaVersion(db_));
  if (!found) {
    RETURN_IF_ERROR(Exec(db_, "create schema", kSchema));
    ASSIGN_OR_RETURN(Statement put, Statement::Prepare(db_, "record schema_version",
                                                       "INSERT INTO meta (key, value) "
                                                       "VALUES ('schema_version', ?1)"));
    RETURN_IF_ERROR(put.BindInt(1, kSchemaVersion).Run());
  } else if (*found > kSchemaVersion) {
    // A newer arbiterd wrote it; reading it with this schema could misread or
    // destroy what that version knows.
    return absl::FailedPreconditionError(
        absl::StrCat("verdict store has schema_version ", *found,
                     ", newer than this build's schema_version ", kSchemaVersion,
                     "; refusing to open it"));
  } else if (*found < kSchemaVersion) {
    // Migrations from older versions go here, one step per version; version 1 is the first.
    return absl::FailedPreconditionError(
        absl::StrCat("verdict store has schema_version ", *found,
                     ", older than any this build (schema_version ", kSchemaVersion,
                     ") migrates from"));
  }
  return txn.Commit("migrate");
}

int SqliteVerdictStore::schema_version() const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::optional<int64_t>> version = ReadSchemaVersion(db_);
  return version.ok() && version->has_value() ? static_cast<int>(**version) : 0;
}

absl::Status SqliteVerdictStore::PutVerdict(const Verdict& v) {
  RETURN_IF_ERROR(CheckPutVerdict(v));
  const std::string op = absl::StrCat("put verdict ", KeyText(v.fingerprint, v.dtype, v.bucket));
  const std::string dtype(DTypeName(v.dtype));
  const std::string bucket = StoreKeyOf(v.bucket, v.scope);

  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.Begin(op));
  {
    // Delete then insert: the cascade drops the old results with the old row.
    ASSIGN_OR_RETURN(Statement erase, Statement::Prepare(db_, op,
                                                         "DELETE FROM verdicts WHERE fingerprint "
                                                         "= ?1 AND op = ?2 AND dtype = ?3 AND "
                                                         "bucket = ?4"));
    RETURN_IF_ERROR(
        erase.BindText(1, v.fingerprint).BindText(2, kOp).BindText(3, dtype).BindText(4, bucket)
            .Run());

    ASSIGN_OR_RETURN(Statement insert,
                     Statement::Prepare(db_, op,
                                        "INSERT INTO verdicts (fingerprint, op, dtype, bucket, "
                                        "candidates, winner, winner_version, source, reason, "
                                        "measured_dtype, measured_m, measured_n, measured_k, "
                                        "created_unix) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                                        "?9, ?10, ?11, ?12, ?13, ?14)"));
    RETURN_IF_ERROR(insert.BindRow(verdict_rows::VerdictRow(v)).Run());

    ASSIGN_OR_RETURN(Statement result,
                     Statement::Prepare(db_, op,
                                        "INSERT INTO verdict_results (fingerprint, op, dtype, "
                                        "bucket, ordinal, name, version, tier, determinism, "
                                        "state, reason, median_seconds, spread, samples, "
                                        "max_abs_error, max_rel_error) VALUES (?1, ?2, ?3, ?4, "
                                        "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"));
    for (size_t i = 0; i < v.results.size(); ++i) {
      RETURN_IF_ERROR(result.BindRow(verdict_rows::ResultRow(v, i)).Run());
    }
  }
  return txn.Commit(op);
}

absl::StatusOr<Verdict> SqliteVerdictStore::GetVerdict(const std::string& fingerprint, DType dtype,
                                                       const Bucket& bucket) {
  const std::string op = absl::StrCat("get verdict ", KeyText(fingerprint, dtype, bucket));
  absl::MutexLock lock(&mu_);
  // One read transaction, so the verdict and its results are one snapshot.
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.BeginRead(op));
  Verdict v;
  {
    ASSIGN_OR_RETURN(Statement query,
                     Statement::Prepare(db_, op,
                                        absl::StrCat(kVerdictColumns,
                                                     "WHERE fingerprint = ?1 AND op = ?2 AND "
                                                     "dtype = ?3 AND bucket = ?4")));
    query.BindText(1, fingerprint)
        .BindText(2, kOp)
        .BindText(3, DTypeName(dtype))
        .BindText(4, bucket.ToString());
    ASSIGN_OR_RETURN(bool found, query.Step());
    if (!found) {
      return absl::NotFoundError(absl::StrCat("verdict store: no verdict for ",
                                              KeyText(fingerprint, dtype, bucket)));
    }
    ASSIGN_OR_RETURN(v, verdict_rows::ReadVerdict(SqliteRow(query)));
    ASSIGN_OR_RETURN(Statement results, Statement::Prepare(db_, op, kResultsQuery));
    RETURN_IF_ERROR(LoadResults(results, v));
  }
  RETURN_IF_ERROR(txn.Commit(op));
  return v;
}

absl::StatusOr<std::vector<Verdict>> SqliteVerdictStore::ListVerdicts(
    const std::string& fingerprint, const VerdictFilter& filter) {
  const std::string op = absl::StrCat("list verdicts of ", fingerprint);
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.BeginRead(op));
  std::vector<Verdict> verdicts;
  {
    ASSIGN_OR_RETURN(Statement query,
                     Statement::Prepare(db_, op,
                                        absl::StrCat(kVerdictColumns, kVerdictScope,
                                                     "ORDER BY dtype, bucket")));
    query.BindText(1, fingerprint).BindText(2, kOp);
    BindScope(query, filter.dtype, filter.bucket, filter.candidate);
    ASSIGN_OR_RETURN(Statement results, Statement::Prepare(db_, op, kResultsQuery));
    while (true) {
      ASSIGN_OR_RETURN(bool row, query.Step());
      if (!row) break;
      ASSIGN_OR_RETURN(Verdict v, verdict_rows::ReadVerdict(SqliteRow(query)));
      RETURN_IF_ERROR(LoadResults(results, v));
      verdicts.push_back(std::move(v));
    }
  }
  RETURN_IF_ERROR(txn.Commit(op));
  return verdicts;
}

absl::StatusOr<int64_t> SqliteVerdictStore::CountVerdicts(const std::string& fingerprint) {
  const std::string op = absl::StrCat("count verdicts of ", fingerprint);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement query,
                   Statement::Prepare(db_, op,
                                      "SELECT COUNT(*) FROM verdicts "
                                      "WHERE fingerprint = ?1 AND op = ?2"));
  query.BindText(1, fingerprint).BindText(2, kOp);
  ASSIGN_OR_RETURN(bool row, query.Step());
  if (!row) return absl::InternalError(absl::StrCat("verdict store: ", op, ": no row"));
  return query.ReadInt(0);
}

absl::StatusOr<int> SqliteVerdictStore::Invalidate(const std::string& fingerprint,
                                                   const InvalidateScope& scope) {
  RETURN_IF_ERROR(CheckInvalidateScope(scope));
  const std::string op = absl::StrCat("invalidate verdicts of ", fingerprint);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement erase,
      Statement::Prepare(db_, op, absl::StrCat("DELETE FROM verdicts ", kVerdictScope)));
  erase.BindText(1, fingerprint).BindText(2, kOp);
  BindScope(erase, scope.dtype, scope.bucket, scope.candidate);
  RETURN_IF_ERROR(erase.Run());
  // Counts the verdict rows only: the cascaded result rows are not counted.
  return erase.changes();
}

absl::Status SqliteVerdictStore::PutForce(const Force& f) {
  RETURN_IF_ERROR(CheckPutForce(f));
  const std::string op = absl::StrCat("put force ", KeyText(f.fingerprint, f.dtype, f.bucket));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement put,
                   Statement::Prepare(db_, op,
                                      "INSERT OR REPLACE INTO forces (fingerprint, dtype, bucket, "
                                      "candidate, reason, created_unix) "
                                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  return put.BindText(1, f.fingerprint)
      .BindText(2, DTypeName(f.dtype))
      .BindText(3, StoreKeyOf(f.bucket, f.scope))
      .BindText(4, f.candidate)
      .BindText(5, f.reason)
      .BindInt(6, f.created_unix)
      .Run();
}

absl::StatusOr<std::optional<Force>> SqliteVerdictStore::GetForce(const std::string& fingerprint,
                                                                  DType dtype,
                                                                  const Bucket& bucket) {
  const std::string op = absl::StrCat("get force ", KeyText(fingerprint, dtype, bucket));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement query,
                   Statement::Prepare(db_, op,
                                      absl::StrCat(kForceColumns,
                                                   "WHERE fingerprint = ?1 AND dtype = ?2 AND "
                                                   "bucket = ?3")));
  query.BindText(1, fingerprint).BindText(2, DTypeName(dtype)).BindText(3, bucket.ToString());
  ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) return std::optional<Force>();
  ASSIGN_OR_RETURN(Force f, verdict_rows::ReadForce(SqliteRow(query)));
  return std::optional<Force>(std::move(f));
}

absl::StatusOr<bool> SqliteVerdictStore::RemoveForce(const std::string& fingerprint, DType dtype,
                                                     const Bucket& bucket,
                                                     const VerdictScope& scope) {
  const std::string op = absl::StrCat("remove force ", KeyText(fingerprint, dtype, bucket));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement erase,
                   Statement::Prepare(db_, op,
                                      "DELETE FROM forces WHERE fingerprint = ?1 AND dtype = ?2 "
                                      "AND bucket = ?3"));
  erase.BindText(1, fingerprint)
      .BindText(2, DTypeName(dtype))
      .BindText(3, StoreKeyOf(bucket, scope));
  RETURN_IF_ERROR(erase.Run());
  return erase.changes() > 0;
}

absl::StatusOr<std::vector<Force>> SqliteVerdictStore::ListForces(const std::string& fingerprint) {
  const std::string op = absl::StrCat("list forces of ", fingerprint);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement query,
                   Statement::Prepare(db_, op,
                                      absl::StrCat(kForceColumns,
                                                   "WHERE fingerprint = ?1 ORDER BY dtype, "
                                                   "bucket")));
  query.BindText(1, fingerprint);
  std::vector<Force> forces;
  while (true) {
    ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(Force f, verdict_rows::ReadForce(SqliteRow(query)));
    forces.push_back(std::move(f));
  }
  return forces;
}

absl::Status SqliteVerdictStore::PutQuarantine(const QuarantineEntry& q) {
  RETURN_IF_ERROR(CheckPutQuarantine(q));
  const std::string op =
      absl::StrCat("put quarantine ", q.candidate, " ", q.scope, " on ", q.fingerprint);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement put,
                   Statement::Prepare(db_, op,
                                      "INSERT OR REPLACE INTO quarantine (candidate, version, "
                                      "scope, fingerprint, reason, created_unix) "
                                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  return put.BindText(1, q.candidate)
      .BindInt(2, q.version)
      .BindText(3, q.scope)
      .BindText(4, q.fingerprint)
      .BindText(5, q.reason)
      .BindInt(6, q.created_unix)
      .Run();
}

absl::StatusOr<std::vector<QuarantineEntry>> SqliteVerdictStore::ListQuarantine(
    const std::string& fingerprint) {
  const std::string op = absl::StrCat("list quarantine of ", fingerprint);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement query,
                   Statement::Prepare(db_, op,
                                      "SELECT candidate, version, scope, fingerprint, reason, "
                                      "created_unix FROM quarantine WHERE fingerprint = ?1 "
                                      "ORDER BY candidate, scope"));
  query.BindText(1, fingerprint);
  std::vector<QuarantineEntry> entries;
  while (true) {
    ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(QuarantineEntry q, verdict_rows::ReadQuarantine(SqliteRow(query)));
    entries.push_back(std::move(q));
  }
  return entries;
}

absl::StatusOr<int> SqliteVerdictStore::ClearQuarantine(const std::string& fingerprint,
                                                        const std::string& candidate) {
  const std::string op = absl::StrCat("clear quarantine of ", fingerprint);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Statement erase,
                   Statement::Prepare(db_, op,
                                      "DELETE FROM quarantine WHERE fingerprint = ?1 "
                                      "AND (?2 IS NULL OR candidate = ?2)"));
  erase.BindText(1, fingerprint);
  if (candidate.empty()) {
    erase.BindNull(2);
  } else {
    erase.BindText(2, candidate);
  }
  RETURN_IF_ERROR(erase.Run());
  return erase.changes();
}

// Releases its key on destruction; keeps the key set alive past the store.
class SqliteVerdictStore::Lease final : public StoreLease {
 public:
  Lease(std::shared_ptr<Leases> leases, std::string key)
      : leases_(std::move(leases)), key_(std::move(key)) {}
  ~Lease() override {
    std::lock_guard<std::mutex> lock(leases_->mu);
    leases_->held.erase(key_);
  }

 private:
  const std::shared_ptr<Leases> leases_;
  const std::string key_;
};

absl::StatusOr<std::unique_ptr<StoreLease>> SqliteVerdictStore::TryLease(
    const std::string& fingerprint, DType dtype, const Bucket& bucket, const VerdictScope& scope) {
  std::string key = absl::StrCat(fingerprint, " ", DTypeName(dtype), " ", StoreKeyOf(bucket, scope));
  std::lock_guard<std::mutex> lock(leases_->mu);
  if (!leases_->held.insert(key).second) return std::unique_ptr<StoreLease>();
  return std::unique_ptr<StoreLease>(new Lease(leases_, std::move(key)));
}

namespace {
// No other daemon shares the file, so nothing is ever delivered.
class SilentSubscription final : public StoreSubscription {};
}  // namespace

std::unique_ptr<StoreSubscription> SqliteVerdictStore::Subscribe(
    std::function<void(const StoreChange&)> on_change) {
  return std::make_unique<SilentSubscription>();
}

}  // namespace arbiter
