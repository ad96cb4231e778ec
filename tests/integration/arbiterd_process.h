// Runs the real arbiterd binary as a child process for integration tests:
// ephemeral port (--listen 127.0.0.1:0 --port-file), its own log file, and
// readiness by condition - the port file appears, then grpc.health.v1 says
// SERVING - never by a blind sleep.
//
// Owns the child: the destructor sends SIGTERM and reaps it (SIGKILL only if it
// does not exit within the shutdown deadline).
// Not thread-safe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace arbiter::testing {

struct ArbiterdOptions {
  std::string binary;                  // path to arbiterd
  std::string store_path;              // --store
  std::string backend = "cpu";         // --backend
  std::string tuning = "sync";         // --tuning
  std::vector<std::string> extra_args; // appended as given
  double start_timeout_seconds = 60;   // until SERVING
};

class ArbiterdProcess {
 public:
  // nullptr with `error` set (including the daemon's log) when it does not come up.
  static std::unique_ptr<ArbiterdProcess> Start(const ArbiterdOptions& options, std::string* error);
  ~ArbiterdProcess();
  ArbiterdProcess(const ArbiterdProcess&) = delete;
  ArbiterdProcess& operator=(const ArbiterdProcess&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  std::string ReadLog() const;

  // SIGTERM, then waits up to `timeout_seconds` for exit. Returns the exit
  // status (WEXITSTATUS), 128+signal if killed by a signal, or -1 on timeout.
  int Terminate(double timeout_seconds = 30);
  // Waits up to `timeout_seconds` for the daemon to exit on its own (a crash, a
  // fault it exits for), without signalling it. Returns as Terminate does.
  int WaitExit(double timeout_seconds = 60);

 private:
  ArbiterdProcess() = default;
  // Reaps the child if it has exited; fills exit_status_.
  bool Exited();

  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  std::string dir_;       // temporary: port file and log
  std::string log_path_;
};

// A fresh temporary directory (removed by the caller or left for post-mortem).
std::string MakeTempDir(const std::string& prefix);

}  // namespace arbiter::testing
