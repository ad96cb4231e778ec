// The daemon: composes a backend (cpu or cuda), the candidate registry, the
// verdict store and the Arbiter, and serves them over gRPC (Dispatch, Admin,
// grpc.health.v1 and server reflection), with the operations pieces: admin
// authorization (admin_auth.h), listener TLS (tls.h) and Prometheus metrics
// (metrics.h: the engine observer, an RPC interceptor and a state probe).
//
// Health: the server starts only once the registry is verified against the
// device and the store is open; it then reports SERVING while the backend is
// healthy (polled), NOT_SERVING when Arbiter::Health() fails, and NOT_SERVING
// from the first moment of Shutdown.
//
// Owns everything it composes. Shutdown (or the destructor): NOT_SERVING, stop
// accepting, drop queued measurements and stop the running one at its next
// checkpoint, wait for the calls in flight - and only for them - up to the grace
// period, cancel the rest, close the store. With nothing in flight it returns at
// once. Work still inside a kernel when the grace is spent is not waited for:
// Shutdown says so and the process must exit without destroying the Daemon.
//
// A candidate that hangs or faults the device while being measured ends the
// process (exit status kExitCandidateFault, after logging why); the intent
// file beside the store makes the restarted daemon quarantine it.
//
// Thread-safe: Shutdown may be called from any thread, more than once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpcpp/server.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "engine/arbiter.h"
#include "server/tls.h"

namespace arbiter::server {

class DispatchService;
class AdminService;
class FdSocket;
class AdminAuth;
class CallTracker;
class Metrics;
class MetricsEndpoint;

// Device streams for --workers 0: one on the CPU (its kernels already use every
// core), four on a GPU (small requests are not queued behind one large one).
int DefaultWorkers(std::string_view backend);

// The device arbiterd serves.
enum class BackendKind {
  kAuto,  // cuda when this arbiterd is built with CUDA and a GPU is visible, else cpu
  kCpu,
  kCuda,
};
std::string_view BackendKindName(BackendKind kind);  // "auto", "cpu", "cuda"
// INVALID_ARGUMENT `backend: expected auto, cpu or cuda, got "tpu"` for any other name.
absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name);

// arbiterd's exit status when a candidate hung or faulted the device while being
// measured: the supervisor restarts it, and the restart quarantines the candidate.
inline constexpr int kExitCandidateFault = 3;

// Candidates a test daemon adds to the registry of `backend` ("cpu" or "cuda"),
// e.g. planted faulting ones (tests/integration/arbiterd_faults). arbiterd adds none.
using ExtraCandidates = std::function<std::vector<CandidateSpec>(std::string_view backend)>;

// "127.0.0.1:0,unix:/run/a.sock" -> {"127.0.0.1:0", "unix:/run/a.sock"}.
// INVALID_ARGUMENT for an empty list or entry, or a unix: address with no path.
absl::StatusOr<std::vector<std::string>> ParseListeners(std::string_view listen);
bool IsUnixListener(std::string_view address);

// The engine's options as arbiterd starts it: workers 0, sized to the device.
inline ArbiterOptions EngineDefaults() {
  ArbiterOptions options;
  options.workers = 0;
  return options;
}

// arbiterd's flags are these fields; their defaults are the flags' defaults.
struct DaemonOptions {
  // Comma-separated listeners: host:port (port 0 binds an ephemeral port) or
  // unix:/path (a Unix domain socket, whose fd socket is /path.fd).
  std::string listen = "127.0.0.1:50051";
  std::string store_path = "./arbiter.db";   // SQLite file (":memory:" for none) or postgresql:// URI
  std::string store_password_file;           // PostgreSQL password (first line); else libpq's sources
  BackendKind backend = BackendKind::kAuto;  // the device served
  // The GPU this daemon owns: a CUDA device ordinal ("1") or a GPU UUID ("GPU-..."); empty:
  // device 0. One daemon per GPU, each with its own listener and metrics endpoint.
  std::string device;
  // The engine: tuning, workers (0: sized to the device), queue, measurement,
  // noise, limits, region quotas, resident tensors.
  ArbiterOptions arbiter = EngineDefaults();
  int64_t max_message_bytes = 600ll << 20;   // 8192^2 f32 A and B (512 MiB) plus headroom
  double shutdown_grace_seconds = 10;        // in-flight calls get at most this long after SIGTERM
  std::string port_file;                     // once serving: the first TCP listener's bound port, else the unix address
  double health_poll_seconds = 1;            // how often the backend's health is polled
  std::string admin_token_file;              // bearer token for Admin; empty: loopback listeners only
  TlsOptions tls;                            // listener certificate and key; empty: plaintext
  std::string metrics_listen;                // host:port for GET /metrics; empty: no endpoint
  int64_t max_sessions = 1024;               // fd socket sessions open at once
  int64_t unix_socket_buffer_bytes = 4 << 20;  // SO_SNDBUF/SO_RCVBUF asked for on unix: connections; 0: the kernel's
  int64_t launch_graphs = 64;                // per device stream: repeated dispatches replayed as CUDA graphs; 0: none
  // Tests only (no flag sets it): candidates registered after the backend's own,
  // e.g. planted wrong kernels that show the daemon catches them.
  std::vector<CandidateSpec> extra_candidates;
  // arbiter.tuning_intent_file, when empty, is "<store>.intent" beside a file store (none for
  // ":memory:" or a store URI).
};

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const DaemonOptions& options,
                                                        ExtraCandidates extra = nullptr);
  ~Daemon();  // Shutdown; what a timed-out Shutdown left running is kept until exit, not destroyed
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The port actually bound by the first TCP listener (the ephemeral one when
  // --listen asked for port 0); 0 when every listener is a Unix socket.
  int port() const { return port_; }
  Arbiter& arbiter() { return *arbiter_; }
  // The port /metrics is served on; 0 without --metrics-listen.
  int metrics_port() const;
  // The fd socket's path (the first Unix listener's path + ".fd"); empty without one.
  std::string fd_socket_path() const;

  // NOT_SERVING, then stops the server within the grace period and closes the
  // store. False when the grace ran out with work still inside a kernel: the
  // caller must then exit the process at once (std::_Exit), not destroy the Daemon.
  bool Shutdown();

 private:
  Daemon(const DaemonOptions& options, ExtraCandidates extra);
  // Builds the engine, the services and the server over them, and starts serving.
  absl::Status Start();
  // The backend, its registry, the store, the metrics and the Arbiter over them.
  absl::Status StartEngine();
  // Sessions (and so regions), next to the first Unix listener, if there is one; the
  // metrics' state probe.
  absl::Status StartFdSocket();
  // The gRPC server on every listener; the address each one bound.
  absl::StatusOr<std::vector<std::string>> StartServer(
      const std::shared_ptr<grpc::ServerCredentials>& credentials);
  void WatchHealth();
  void SetServing(bool serving) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DaemonOptions options_;
  const ExtraCandidates extra_;
  std::unique_ptr<CallTracker> calls_;  // outlives the server whose calls it counts
  std::unique_ptr<AdminAuth> auth_;
  std::unique_ptr<Metrics> metrics_;  // the Arbiter's observer: outlives it
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;  // GET /metrics, when asked for
  std::unique_ptr<Arbiter> arbiter_;
  std::unique_ptr<FdSocket> fd_socket_;  // sessions; next to the first Unix listener
  std::unique_ptr<DispatchService> dispatch_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::vector<std::string> listeners_;  // --listen, split
  std::thread health_watcher_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // set once, by Shutdown; wakes the health watcher
  bool store_up_ ABSL_GUARDED_BY(mu_) = true;  // as the health watcher last saw it
  bool serving_ ABSL_GUARDED_BY(mu_) = false;   // what grpc.health.v1 reports now
  std::atomic<bool> clean_{true};  // what the first Shutdown returned (later calls return it again)
};

}  // namespace arbiter::server
