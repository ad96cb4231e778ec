// Serves Prometheus' GET /metrics over plain HTTP from Metrics::Scrape, on a
// thread of its own.
//
// Why not prometheus-cpp's Exposer: civetweb starts its threads with a fixed
// 100 KiB stack (a compile-time constant of Debian's libcivetweb, not an option
// the Exposer passes through), and glibc refuses (EINVAL) to create a thread
// whose stack cannot hold the process's static TLS block. libcublasLt alone
// carries 92 KiB of TLS and OpenBLAS 60 KiB, so in any arbiterd built with CUDA
// every civetweb thread fails and the Exposer throws "null context when
// constructing CivetServer". This endpoint's one thread has the default stack.
//
// One thread serves every connection at once: an event loop over non-blocking
// sockets (poll), so an idle or slow client holds only its own connection.
// Each connection has a deadline from its accept to the last byte of the
// response; at the deadline it is closed, whatever it was doing. At most
// `max_connections` are open; one more is answered 503 and closed at once.
// The destructor wakes the loop, which closes every connection and returns:
// shutdown never waits for a client.
//
// Thread-safe: Create and the destructor from one thread; `scrape` is called on
// the endpoint's thread and must be thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "engine/status.h"

namespace arbiter::server {

struct MetricsEndpointOptions {
  std::string listen;               // "host:port"; port 0 picks a free one
  int max_connections = 16;         // open at once; one more is answered 503 and closed
  double request_seconds = 5;       // from accept to the response sent; then the connection closes
};

class MetricsEndpoint {
 public:
  // Listens on `options.listen`. INVALID_ARGUMENT for a malformed address or
  // limit, UNAVAILABLE naming the address when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Create(
      const MetricsEndpointOptions& options, std::function<std::string()> scrape);
  ~MetricsEndpoint();  // closes every connection and joins the thread, without waiting for clients
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }

 private:
  class Loop;
  MetricsEndpoint(int listen_fd, int wake_read, int wake_write, int port);

  const int listen_fd_;
  const int wake_read_;   // a byte here (from the destructor) ends the loop
  const int wake_write_;
  const int port_;
  std::thread thread_;
};

}  // namespace arbiter::server
