#include "engine/pg_connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace arbiter {
namespace {

// libpq's messages end in a newline, and some run over several lines; a log line is one.
std::string Trimmed(const char* message) {
  std::string text = message ? message : "";
  absl::RemoveExtraAsciiWhitespace(&text);
  return text;
}

// Server notices (a shutdown's "terminating connection") go to the log, not stderr.
void LogNotice(void*, const char* message) {
  spdlog::debug("verdict store: server notice: {}", Trimmed(message));
}

// Every connection made here routes its notices through LogNotice.
pg_conn* Quiet(pg_conn* conn) {
  if (conn != nullptr) PQsetNoticeProcessor(conn, LogNotice, nullptr);
  return conn;
}

// The status for a failed statement. The server cannot be reached (connection lost,
// shutting down, starting up, out of connections): UNAVAILABLE, so callers know to
// serve what they hold and try again later. Anything else says the statement or the
// data is wrong.
absl::Status StatementError(pg_conn* conn, const pg_result* result, const std::string& op) {
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state ? state : "";
  const std::string detail = Trimmed(result ? PQresultErrorMessage(result) : PQerrorMessage(conn));
  const std::string message = absl::StrCat(
      "verdict store: ", op, ": ", detail.empty() ? Trimmed(PQerrorMessage(conn)) : detail,
      sqlstate.empty() ? "" : absl::StrCat(" (SQLSTATE ", sqlstate, ")"));
  if (PQstatus(conn) == CONNECTION_BAD || sqlstate.empty()) return absl::UnavailableError(message);
  const std::string klass = sqlstate.substr(0, 2);
  if (klass == "08" || klass == "53" || klass == "57") return absl::UnavailableError(message);
  if (klass == "40") return absl::AbortedError(message);  // serialization failure, deadlock
  if (klass == "28") return absl::PermissionDeniedError(message);
  if (klass == "42" && sqlstate == "42501") return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

// Keyword and value arrays for libpq, NULL-terminated, pointing into `params`.
struct ParamArrays {
  explicit ParamArrays(const PgParams& params) {
    for (const auto& [key, value] : params) {
      keys.push_back(key.c_str());
      values.push_back(value.c_str());
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
  }
  std::vector<const char*> keys;
  std::vector<const char*> values;
};

}  // namespace

PgResult::~PgResult() { PQclear(result_); }

PgResult& PgResult::operator=(PgResult&& other) noexcept {
  if (this != &other) {
    PQclear(result_);
    result_ = std::exchange(other.result_, nullptr);
  }
  return *this;
}

int PgResult::rows() const { return PQntuples(result_); }

bool PgResult::IsNull(int row, int col) const { return PQgetisnull(result_, row, col) != 0; }

std::string PgResult::Text(int row, int col) const {
  return std::string(PQgetvalue(result_, row, col), PQgetlength(result_, row, col));
}

absl::StatusOr<int64_t> PgResult::Int(int row, int col) const {
  int64_t v = 0;
  if (IsNull(row, col) || !absl::SimpleAtoi(Text(row, col), &v)) {
    return absl::DataLossError(absl::StrCat("verdict store: column ", PQfname(result_, col),
                                            " holds \"", Text(row, col), "\", not an integer"));
  }
  return v;
}

absl::StatusOr<double> PgResult::Real(int row, int col) const {
  const std::string text = Text(row, col);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);  // reads "NaN", "Infinity", denormals
  if (IsNull(row, col) || text.empty() || end != text.c_str() + text.size()) {
    return absl::DataLossError(absl::StrCat("verdict store: column ", PQfname(result_, col),
                                            " holds \"", text, "\", not a number"));
  }
  return v;
}

int64_t PgResult::affected() const {
  int64_t n = 0;
  return absl::SimpleAtoi(PQcmdTuples(result_), &n) ? n : 0;
}

PgValue PgInt(int64_t v) { return absl::StrCat(v); }

PgValue PgReal(double v) {
  if (std::isnan(v)) return std::string("NaN");
  if (std::isinf(v)) return std::string(v > 0 ? "Infinity" : "-Infinity");
  return absl::StrFormat("%.17g", v);
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Connect(const PgParams& params) {
  const ParamArrays arrays(params);
  pg_conn* conn =
      Quiet(PQconnectdbParams(arrays.keys.data(), arrays.values.data(), /*expand_dbname=*/1));
  std::unique_ptr<PgConnection> connection(new PgConnection(conn));
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq: out of memory connecting");
  if (PQstatus(conn) != CONNECTION_OK) {
    return absl::UnavailableError(Trimmed(PQerrorMessage(conn)));
  }
  return connection;
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::ConnectInterruptible(
    const PgParams& params, int wake_fd, std::chrono::milliseconds timeout) {
  const ParamArrays arrays(params);
  pg_conn* conn = Quiet(PQconnectStartParams(arrays.keys.data(), arrays.values.data(), 1));
  std::unique_ptr<PgConnection> connection(new PgConnection(conn));
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq: out of memory connecting");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  PostgresPollingStatusType polling = PGRES_POLLING_WRITING;
  while (PQstatus(conn) != CONNECTION_BAD && polling != PGRES_POLLING_OK &&
         polling != PGRES_POLLING_FAILED) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return absl::DeadlineExceededError("connecting: timed out");
    // The socket can change while connecting (one host after another), so ask each time.
    pollfd fds[2] = {{PQsocket(conn),
                      static_cast<short>(polling == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0},
                     {wake_fd, POLLIN, 0}};
    const int ready = poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("connecting: poll: ", std::strerror(errno)));
    }
    if (fds[1].revents != 0) return absl::CancelledError("connecting: stopped");
    if (ready > 0) polling = PQconnectPoll(conn);
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    return absl::UnavailableError(Trimmed(PQerrorMessage(conn)));
  }
  return connection;
}

PgConnection::~PgConnection() { PQfinish(conn_); }

absl::StatusOr<PgResult> PgConnection::Exec(const std::string& op, const char* sql,
                                            std::initializer_list<PgValue> params) {
  return Exec(op, sql, std::vector<PgValue>(params));
}

absl::StatusOr<PgResult> PgConnection::Exec(const std::string& op, const char* sql,
                                            const std::vector<PgValue>& params) {
  std::vector<const char*> values;
  for (const PgValue& p : params) values.push_back(p ? p->c_str() : nullptr);
  pg_result* raw = PQexecParams(conn_, sql, static_cast<int>(values.size()),
                                /*paramTypes=*/nullptr, values.data(), /*paramLengths=*/nullptr,
                                /*paramFormats=*/nullptr, /*resultFormat=text*/ 0);
  PgResult result(raw);
  const ExecStatusType status = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return StatementError(conn_, raw, op);
  }
  return result;
}

bool PgConnection::broken() const { return conn_ == nullptr || PQstatus(conn_) == CONNECTION_BAD; }

bool PgConnection::StillUp() {
  if (broken()) return false;
  pollfd fd = {PQsocket(conn_), POLLIN, 0};
  if (poll(&fd, 1, 0) <= 0) return true;  // nothing arrived: nothing changed
  // The server spoke unasked: a notice, or the end. PQconsumeInput reads it and fails on EOF.
  return PQconsumeInput(conn_) == 1 && PQstatus(conn_) == CONNECTION_OK;
}

int PgConnection::socket() const { return PQsocket(conn_); }

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnector::Connect() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_at_ && std::chrono::steady_clock::now() - *failed_at_ < retry_interval_) {
      return absl::UnavailableError(
          absl::StrCat("verdict store ", describe_,
                       " is unreachable (retrying shortly): ", last_failure_.message()));
    }
  }
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = PgConnection::Connect(params_);
  std::lock_guard<std::mutex> lock(mu_);
  if (conn.ok()) {
    failed_at_.reset();
    return conn;
  }
  failed_at_ = std::chrono::steady_clock::now();
  last_failure_ = conn.status();
  return absl::Status(
      conn.status().code(),
      absl::StrCat("verdict store ", describe_, ": cannot connect: ", conn.status().message()));
}

PgTransaction::~PgTransaction() {
  if (open_ && !conn_.broken()) (void)conn_.Exec("roll back", "ROLLBACK");
}

absl::Status PgTransaction::Begin(const std::string& op) {
  RETURN_IF_ERROR(conn_.Exec(absl::StrCat(op, ": begin"), "BEGIN").status());
  open_ = true;
  return absl::OkStatus();
}

absl::Status PgTransaction::Commit(const std::string& op) {
  open_ = false;  // COMMIT ends the transaction even when it fails
  return conn_.Exec(absl::StrCat(op, ": commit"), "COMMIT").status();
}

}  // namespace arbiter
