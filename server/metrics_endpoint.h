// Serves Prometheus' GET /metrics over plain HTTP from Metrics::Scrape, on a
// thread of its own.
//
// Why not prometheus-cpp's Exposer: civetweb starts its threads with a fixed
// 100 KiB stack, and glibc refuses (EINVAL) to create a thread whose stack
// cannot hold the process's static TLS block. libcublasLt alone carries 92 KiB
// of TLS and OpenBLAS 60 KiB, so in any arbiterd built with CUDA every civetweb
// thread fails and the Exposer throws "null context when constructing
// CivetServer". This endpoint's thread has the default stack.
//
// Scrapes are small and infrequent: connections are served one at a time, each
// with a read deadline, so a stalled client cannot hold the endpoint for long.
//
// Thread-safe: Create and the destructor from one thread; `scrape` is called on
// the endpoint's thread and must be thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "engine/status.h"

namespace arbiter::server {

class MetricsEndpoint {
 public:
  // Listens on `listen` ("host:port"; port 0 picks a free one). UNAVAILABLE
  // naming the address when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Create(
      const std::string& listen, std::function<std::string()> scrape);
  ~MetricsEndpoint();  // stops serving and joins the thread
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }

 private:
  MetricsEndpoint(int listen_fd, int wake_read, int wake_write, int port,
                  std::function<std::string()> scrape);
  void Serve();
  void Answer(int fd);

  const int listen_fd_;
  const int wake_read_;   // a byte here (from the destructor) ends Serve
  const int wake_write_;
  const int port_;
  const std::function<std::string()> scrape_;
  std::thread thread_;
};

}  // namespace arbiter::server
