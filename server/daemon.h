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
// accepting, give in-flight calls the grace period, cancel the rest, wait for
// background tuning, close the store.
//
// Thread-safe: Shutdown may be called from any thread, more than once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/server.h>

#include "engine/arbiter.h"
#include "server/tls.h"

namespace arbiter::server {

class DispatchService;
class AdminService;
class AdminAuth;
class Metrics;
class MetricsEndpoint;

struct DaemonOptions {
  std::string listen = "127.0.0.1:50051";    // host:port; port 0 binds an ephemeral port
  std::string store_path = "./arbiter.db";   // SQLite file (":memory:" for none) or postgresql:// URI
  std::string store_password_file;           // PostgreSQL password (first line); else libpq's sources
  std::string backend = "auto";              // auto (cuda when a GPU is visible), cpu or cuda
  TuningPolicy tuning = TuningPolicy::kSync; // default policy on a verdict miss
  int workers = 1;                           // device streams for dispatch and tuning
  int64_t max_queue = 64;                    // dispatches waiting for a stream; more: refused
  int64_t max_message_bytes = 600ll << 20;   // 8192^2 f32 A and B (512 MiB) plus headroom
  double shutdown_grace_seconds = 10;        // in-flight calls get this long before cancellation
  std::string port_file;                     // if set, the bound port is written here once serving
  double health_poll_seconds = 1;            // how often the backend's health is polled
  MeasureOptions measure;                    // how a bucket is measured
  double verify_fraction = 0;                // share of dispatches also checked against the reference
  NoisePolicy noise;                         // when a measured challenger displaces the incumbent
  std::string admin_token_file;              // bearer token for Admin; empty: loopback listeners only
  TlsOptions tls;                            // listener certificate and key; empty: plaintext
  std::string metrics_listen;                // host:port for GET /metrics; empty: no endpoint
};

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const DaemonOptions& options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The port actually bound (the ephemeral one when --listen asked for port 0).
  int port() const { return port_; }
  Arbiter& arbiter() { return *arbiter_; }
  // The port /metrics is served on; 0 without --metrics-listen.
  int metrics_port() const;

  // NOT_SERVING, then stops the server within the grace period and closes the store.
  void Shutdown();

 private:
  explicit Daemon(const DaemonOptions& options);
  absl::Status Start();
  void WatchHealth();
  void SetServing(bool serving);

  const DaemonOptions options_;
  std::unique_ptr<AdminAuth> auth_;
  std::unique_ptr<Metrics> metrics_;  // the Arbiter's observer: outlives it
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;  // GET /metrics, when asked for
  std::unique_ptr<Arbiter> arbiter_;
  std::unique_ptr<DispatchService> dispatch_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread health_watcher_;

  std::mutex mu_;
  std::condition_variable stop_cv_;  // wakes the health watcher at shutdown
  bool stopping_ = false;            // GUARDED_BY(mu_)
  bool serving_ = false;             // GUARDED_BY(mu_)
};

}  // namespace arbiter::server
