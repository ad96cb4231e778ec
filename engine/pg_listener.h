// LISTENs on one PostgreSQL channel over a dedicated connection and hands each
// notification's payload to a callback, on a thread of its own that waits on
// the connection's socket (poll, then PQconsumeInput and PQnotifies). When the
// connection is lost (the server stopped or restarted, the network dropped),
// the thread reconnects with backoff and, once LISTENing again, calls
// `on_resync`: notifications sent in between are lost, so whatever the caller
// cached may be stale.
//
// Thread-safe: connected() may be called from any thread; the callbacks run on
// the listener's thread, one at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "engine/pg_connection.h"
#include "engine/status.h"

namespace arbiter {

struct PgListenerOptions {
  std::string channel;  // a plain identifier
  std::function<void(const std::string& payload)> on_notify;
  std::function<void()> on_resync;                  // LISTENing again after a loss
  std::chrono::milliseconds connect_timeout{5000};  // one connection attempt
  std::chrono::milliseconds max_backoff{2000};      // between failed attempts
};

class PgListener {
 public:
  // Connects and LISTENs before returning, so no notification sent after this
  // returns is missed; UNAVAILABLE when the server cannot be reached.
  static absl::StatusOr<std::unique_ptr<PgListener>> Start(PgParams params,
                                                           PgListenerOptions options);
  // Stops the thread promptly, even while it waits for a server to come back.
  ~PgListener();
  PgListener(const PgListener&) = delete;
  PgListener& operator=(const PgListener&) = delete;

  // Whether the connection is up and LISTENing now.
  bool connected() const { return connected_.load(); }

 private:
  PgListener(PgParams params, PgListenerOptions options, int wake_fd,
             std::unique_ptr<PgConnection> conn);
  static absl::Status Listen(PgConnection& conn, const std::string& channel);
  void Run();
  // Reads what arrived; false when the connection is gone.
  bool Drain();
  // Waits up to `d` unless woken; true when woken (stopping).
  bool Sleep(std::chrono::milliseconds d);

  const PgParams params_;
  const PgListenerOptions options_;
  const int wake_fd_;                   // an eventfd: written once to stop the thread
  std::unique_ptr<PgConnection> conn_;  // used only by the thread once it runs
  std::atomic<bool> connected_{false};
  std::thread thread_;
};

}  // namespace arbiter
