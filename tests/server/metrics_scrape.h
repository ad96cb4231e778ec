// Reading a daemon's /metrics in a test: one plain HTTP GET to 127.0.0.1, and
// the dispatch stages counted there (arbiter_dispatch_stage_seconds) - how a test
// tells which path a Matmul took inside the daemon.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace arbiter::server {

// One HTTP/1.1 GET of `path` from 127.0.0.1:port; the raw response.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    (void)!write(fd, request.data(), request.size());
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) response.append(buf, n);
  }
  close(fd);
  return response;
}

// One GET /metrics; the raw response.
inline std::string Scrape(int port) { return HttpGet(port, "/metrics"); }

// How many Matmuls recorded `stage` in arbiter_dispatch_stage_seconds; -1: no such series.
inline double StageCount(const std::string& scrape, const std::string& stage) {
  const std::string series = "\narbiter_dispatch_stage_seconds_count{stage=\"" + stage + "\"} ";
  const size_t at = scrape.find(series);
  if (at == std::string::npos) return -1;
  return std::stod(scrape.substr(at + series.size()));
}

}  // namespace arbiter::server
