// A real PostgreSQL server for a test: Debian's server binaries
// (/usr/lib/postgresql/<version>/bin), a cluster initdb'd into a fresh
// temporary directory, listening on 127.0.0.1 at a free port with its unix
// socket in that directory. Run as root, the server runs as the `postgres`
// user (which owns the directory); otherwise as the calling user.
//
// The postgres process is this process's child and gets SIGQUIT (immediate
// shutdown) if this process dies first, so a crashed test leaves no server
// behind. TCP connections need the password (password_file()); the fixture's
// own admin connections use the unix socket.
//
// Not thread-safe: one test thread drives it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "engine/status.h"

namespace arbiter::testing {

class PostgresServer {
 public:
  // The newest installed server's bin directory; empty when PostgreSQL's server is
  // not installed.
  static std::string BinDir();

  // NOT_FOUND (saying what to install) when there is no server to run; other errors,
  // with the server's log, when it does not come up.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start();
  // Stops the server (fast shutdown) and removes its directory.
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  int port() const { return port_; }
  // The superuser every URI names; its password is the first line of password_file().
  static constexpr char kUser[] = "arbiter";
  const std::string& password() const { return password_; }
  const std::string& password_file() const { return password_file_; }
  // postgresql://arbiter@127.0.0.1:<port>/<database>[?<query>] - no password in it.
  std::string Uri(const std::string& database, const std::string& query = "") const;

  // A new empty database; returns its name. Takes about half a second.
  absl::StatusOr<std::string> CreateDatabase();
  // The server's reusable test database, emptied of what the store keeps (schema
  // "arbiter" dropped): a fresh store in milliseconds. Connections to it must be closed.
  absl::StatusOr<std::string> EmptyStoreDatabase();
  // Runs `sql` in `database` as the superuser; the first column of the first row, or
  // "" when there is none.
  absl::StatusOr<std::string> Query(const std::string& database, const std::string& sql);

  // Fast shutdown: clients are disconnected, the data stays. Waits until it is down.
  absl::Status Stop();
  // Starts the stopped server again, same directory and port; waits until it accepts.
  absl::Status Restart();
  bool running() const { return pid_ > 0; }

 private:
  PostgresServer() = default;
  absl::Status Launch();
  std::string Log() const;

  std::string bin_;
  std::string dir_;
  std::string password_;
  std::string password_file_;
  int port_ = 0;
  pid_t pid_ = -1;
  int databases_ = 0;
  std::string reused_;  // EmptyStoreDatabase's, once created
};

// The server a test binary's store tests share, started on first use and stopped at
// exit; nullptr with `why` set when it cannot be started (tests skip on it).
PostgresServer* SharedPostgresServer(std::string* why);

}  // namespace arbiter::testing
