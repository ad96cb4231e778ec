#include "server/metrics_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace arbiter::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxRequestBytes = 8192;

// "host:port" or "[v6]:port" -> host, port.
bool SplitHostPort(const std::string& listen, std::string* host, std::string* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) return false;
  *host = listen.substr(0, colon);
  *port = listen.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return true;
}

std::string Response(const std::string& status, const std::string& content_type,
                     const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

// The response to a whole request (line and headers); scrapes only for GET or HEAD /metrics.
std::string Answer(const std::string& request, const std::function<std::string()>& scrape) {
  const std::string line = request.substr(0, request.find("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    return Response("400 Bad Request", "text/plain", "bad request\n");
  }
  const std::string method = line.substr(0, sp1);
  const std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (method != "GET" && method != "HEAD") {
    return Response("405 Method Not Allowed", "text/plain", "GET /metrics\n");
  }
  if (path != "/metrics" && path.rfind("/metrics?", 0) != 0) {
    return Response("404 Not Found", "text/plain", "GET /metrics\n");
  }
  std::string response = Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", scrape());
  if (method == "HEAD") response.resize(response.find("\r\n\r\n") + 4);
  return response;
}

// One client: its request as read so far, then its response as sent so far.
struct Connection {
  int fd = -1;
  Clock::time_point deadline;
  std::string request;
  std::string response;  // non-empty once the request is whole
  size_t sent = 0;
};

}  // namespace

// The endpoint's thread: accepts, reads, answers and closes, never blocking on a client.
class MetricsEndpoint::Loop {
 public:
  Loop(int listen_fd, int wake_read, const MetricsEndpointOptions& options,
       std::function<std::string()> scrape)
      : listen_fd_(listen_fd),
        wake_read_(wake_read),
        max_connections_(static_cast<size_t>(options.max_connections)),
        request_time_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(options.request_seconds))),
        scrape_(std::move(scrape)) {}
  ~Loop() {
    for (Connection& c : connections_) close(c.fd);
  }

  // Until the wake pipe is written.
  void Run() {
    std::vector<pollfd> fds;
    while (true) {
      fds.clear();
      fds.push_back({wake_read_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      Clock::time_point next_deadline = Clock::time_point::max();
      for (const Connection& c : connections_) {
        fds.push_back({c.fd, static_cast<short>(c.response.empty() ? POLLIN : POLLOUT), 0});
        next_deadline = std::min(next_deadline, c.deadline);
      }
      int timeout_ms = -1;
      if (next_deadline != Clock::time_point::max()) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - Clock::now());
        timeout_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
      }
      if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
        if (errno == EINTR) continue;
        spdlog::error("metrics endpoint: poll: {}", std::strerror(errno));
        return;
      }
      if (fds[0].revents != 0) return;
      // Existing connections first: one that just closed frees its place before new ones count.
      const Clock::time_point now = Clock::now();
      std::vector<Connection> kept;
      for (size_t i = 0; i < connections_.size(); ++i) {
        Connection& c = connections_[i];
        const bool open = (fds[i + 2].revents == 0 || Progress(c)) && now < c.deadline;
        if (open) {
          kept.push_back(std::move(c));
        } else {
          close(c.fd);
        }
      }
      connections_ = std::move(kept);
      if (fds[1].revents & POLLIN) AcceptAll(now);
    }
  }

 private:
  // Reads or writes what the socket allows. False once the connection is done
  // (response sent, client gone, or a request too large or malformed).
  bool Progress(Connection& c) {
    if (c.response.empty()) {
      char buf[2048];
      const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      if (n == 0) return false;
      c.request.append(buf, static_cast<size_t>(n));
      if (c.request.find("\r\n\r\n") != std::string::npos) {
        c.response = Answer(c.request, scrape_);
      } else if (c.request.size() >= kMaxRequestBytes) {
        c.response = Response("431 Request Header Fields Too Large", "text/plain",
                              "request over 8192 bytes\n");
      } else {
        return true;
      }
    }
    const ssize_t n = send(c.fd, c.response.data() + c.sent, c.response.size() - c.sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.sent += static_cast<size_t>(n);
    return c.sent < c.response.size();
  }

  void AcceptAll(Clock::time_point now) {
    while (true) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) return;  // EAGAIN: none left (or a transient error: next poll)
      if (connections_.size() >= max_connections_) {
        Refuse(fd);
        continue;
      }
      Connection c;
      c.fd = fd;
      c.deadline = now + request_time_;
      connections_.push_back(std::move(c));
    }
  }

  // Over the cap: 503 at once, without waiting for the request.
  void Refuse(int fd) {
    spdlog::debug("metrics endpoint: {} connections open, refusing one more", connections_.size());
    char discard[2048];
    while (recv(fd, discard, sizeof discard, MSG_DONTWAIT) > 0) {
    }  // what already arrived, so that close sends FIN rather than RST
    const std::string busy =
        Response("503 Service Unavailable", "text/plain", "too many connections\n");
    (void)!send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    close(fd);
  }

  const int listen_fd_;
  const int wake_read_;
  const size_t max_connections_;
  const Clock::duration request_time_;
  const std::function<std::string()> scrape_;
  std::vector<Connection> connections_;
};


absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Create(
    const MetricsEndpointOptions& options, std::function<std::string()> scrape) {
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(absl::StrCat("metrics: max_connections: expected >= 1, got ",
                                                   options.max_connections));
  }
  if (!(options.request_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("metrics: request_seconds: expected > 0, got ",
                                                   options.request_seconds));
  }
  const std::string& listen = options.listen;
  std::string host, port;
  if (!SplitHostPort(listen, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics-listen: expected host:port, got \"", listen, "\""));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot resolve '", listen, "': ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("metrics: cannot listen on '", listen, "': ", why));

  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("metrics: pipe: ", std::strerror(errno)));
  }
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint(fd, wake[0], wake[1], bound_port));
  endpoint->thread_ = std::thread(
      [loop = std::make_unique<Loop>(fd, wake[0], options, std::move(scrape))] { loop->Run(); });
  return endpoint;
}

MetricsEndpoint::MetricsEndpoint(int listen_fd, int wake_read, int wake_write, int port)
    : listen_fd_(listen_fd), wake_read_(wake_read), wake_write_(wake_write), port_(port) {}

MetricsEndpoint::~MetricsEndpoint() {
  const char byte = 0;
  (void)!write(wake_write_, &byte, 1);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

}  // namespace arbiter::server
