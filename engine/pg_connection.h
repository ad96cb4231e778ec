// One libpq connection for the PostgreSQL store: connects from an ordered list
// of libpq keyword/value parameters, runs parameterized SQL (values always
// bound, as text) and turns every failure into an absl::Status - UNAVAILABLE
// when the server cannot be reached or the connection was lost, so callers
// can tell "the store is down" from "the statement is wrong".
//
// This header includes no libpq header: the connection is held as libpq's
// opaque pg_conn.
//
// Not thread-safe: one thread uses a connection at a time. PgConnector is
// thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/status.h"

struct pg_conn;
struct pg_result;

namespace arbiter {

// libpq connection parameters in order: a later keyword overrides an earlier one, and
// a "dbname" holding a URI expands into the keywords it names at its place in the list.
using PgParams = std::vector<std::pair<std::string, std::string>>;

// A statement's result rows, text format. Column and row numbers from 0.
class PgResult {
 public:
  explicit PgResult(pg_result* result) : result_(result) {}
  PgResult(PgResult&& other) noexcept : result_(std::exchange(other.result_, nullptr)) {}
  PgResult& operator=(PgResult&& other) noexcept;
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  ~PgResult();

  int rows() const;
  bool IsNull(int row, int col) const;
  std::string Text(int row, int col) const;
  // A value the store wrote that does not parse is damage: DATA_LOSS naming the column.
  absl::StatusOr<int64_t> Int(int row, int col) const;
  // NaN and the infinities come back as they were stored.
  absl::StatusOr<double> Real(int row, int col) const;
  // Rows a DELETE, INSERT or UPDATE touched.
  int64_t affected() const;

 private:
  pg_result* result_;
};

// A bound parameter: text, or SQL NULL when unset.
using PgValue = std::optional<std::string>;
PgValue PgInt(int64_t v);
// Exact: 17 significant digits, NaN and the infinities by name.
PgValue PgReal(double v);

class PgConnection {
 public:
  // Connects, waiting at most for libpq's connect_timeout. UNAVAILABLE on failure.
  static absl::StatusOr<std::unique_ptr<PgConnection>> Connect(const PgParams& params);
  // Connects without blocking on the server: gives up with CANCELLED as soon as
  // `wake_fd` is readable, DEADLINE_EXCEEDED after `timeout`. For threads that must
  // stop promptly.
  static absl::StatusOr<std::unique_ptr<PgConnection>> ConnectInterruptible(
      const PgParams& params, int wake_fd, std::chrono::milliseconds timeout);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one statement. `op` names what it was for in the error.
  absl::StatusOr<PgResult> Exec(const std::string& op, const char* sql,
                                std::initializer_list<PgValue> params = {});
  absl::StatusOr<PgResult> Exec(const std::string& op, const char* sql,
                                const std::vector<PgValue>& params);

  // The connection was lost (or never made): every statement will fail.
  bool broken() const;
  // Reads whatever the server sent while the connection sat idle (a shutdown
  // notice, end of stream) without blocking; false when that shows it is gone.
  bool StillUp();
  // The socket, for waiting on notifications.
  int socket() const;
  pg_conn* get() { return conn_; }

 private:
  explicit PgConnection(pg_conn* conn) : conn_(conn) {}
  pg_conn* conn_;
};

// Makes connections for one store, at most one attempt per `retry_interval` after a
// failure: while the server is down, callers get UNAVAILABLE at once instead of each
// waiting out a connect timeout. Thread-safe.
class PgConnector {
 public:
  PgConnector(PgParams params, std::string describe, std::chrono::milliseconds retry_interval)
      : params_(std::move(params)),
        describe_(std::move(describe)),
        retry_interval_(retry_interval) {}

  absl::StatusOr<std::unique_ptr<PgConnection>> Connect();
  const PgParams& params() const { return params_; }
  const std::string& describe() const { return describe_; }

 private:
  const PgParams params_;
  const std::string describe_;  // the URI, password redacted
  const std::chrono::milliseconds retry_interval_;
  std::mutex mu_;
  std::optional<std::chrono::steady_clock::time_point> failed_at_;  // GUARDED_BY(mu_)
  absl::Status last_failure_;                                       // GUARDED_BY(mu_)
};

// BEGIN ... COMMIT on one connection; rolled back on destruction unless committed
// (nothing to roll back when the connection was lost: the server already did).
class PgTransaction {
 public:
  explicit PgTransaction(PgConnection& conn) : conn_(conn) {}
  ~PgTransaction();
  PgTransaction(const PgTransaction&) = delete;
  PgTransaction& operator=(const PgTransaction&) = delete;

  absl::Status Begin(const std::string& op);
  absl::Status Commit(const std::string& op);

 private:
  PgConnection& conn_;
  bool open_ = false;
};

}  // namespace arbiter
