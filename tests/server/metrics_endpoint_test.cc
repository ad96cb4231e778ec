#include "server/metrics_endpoint.h"

#include <netinet/in.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <memory>
#include <chrono>
#include <string>

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

// Every wait on the endpoint is bounded by this, so a broken endpoint fails the test instead of
// hanging it; none of the tests' outcomes depends on it.
constexpr int kReceiveBoundSeconds = 30;

// A blocking TCP connection to 127.0.0.1:port whose reads give up after kReceiveBoundSeconds; -1
// when it cannot connect.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval bound{.tv_sec = kReceiveBoundSeconds, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool Send(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// Everything the endpoint sends until it closes the connection (or the bound passes).
std::string ReadUntilClosed(int fd) {
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) response.append(buf, n);
  return response;
}

// Whether the endpoint has neither answered nor closed `fd` yet.
bool StillOpenAndSilent(int fd) {
  char byte;
  return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// One HTTP/1.0 request for `path` to 127.0.0.1:port; the whole response.
std::string HttpGet(int port, const std::string& path) {
  const int fd = Connect(port);
  std::string response;
  if (fd >= 0 && Send(fd, "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")) {
    response = ReadUntilClosed(fd);
  }
  if (fd >= 0) close(fd);
  return response;
}

// An endpoint on a free loopback port with these limits.
std::unique_ptr<MetricsEndpoint> Start(int max_connections, double request_seconds,
                                       std::function<std::string()> scrape) {
  MetricsEndpointOptions options;
  options.listen = "127.0.0.1:0";
  options.max_connections = max_connections;
  options.request_seconds = request_seconds;
  auto endpoint = MetricsEndpoint::Create(options, std::move(scrape));
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  return endpoint.ok() ? std::move(*endpoint) : nullptr;
}

std::string Scrape() { return "arbiter_serving 1\n"; }

TEST(MetricsEndpointTest, GetMetricsAnswersWithTheScrapeOfThatMoment) {
  std::atomic<int> scrapes = 0;  // written on the endpoint's thread
  auto endpoint = MetricsEndpoint::Create({.listen = "127.0.0.1:0"}, [&scrapes] {
    return "arbiter_scrapes_total " + std::to_string(++scrapes) + "\n";
  });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  ASSERT_GT((*endpoint)->port(), 0);
  const std::string first = HttpGet((*endpoint)->port(), "/metrics");
  EXPECT_NE(first.find("200 OK"), std::string::npos) << first;
  EXPECT_NE(first.find("text/plain; version=0.0.4"), std::string::npos) << first;
  EXPECT_NE(first.find("\r\n\r\narbiter_scrapes_total 1\n"), std::string::npos) << first;
  EXPECT_NE(HttpGet((*endpoint)->port(), "/metrics").find("arbiter_scrapes_total 2\n"),
            std::string::npos);
}

TEST(MetricsEndpointTest, OtherPathsAreNotFoundAndNotScraped) {
  std::atomic<int> scrapes = 0;  // written on the endpoint's thread
  auto endpoint = MetricsEndpoint::Create({.listen = "127.0.0.1:0"}, [&scrapes] {
    ++scrapes;
    return std::string();
  });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_NE(HttpGet((*endpoint)->port(), "/").find("404 Not Found"), std::string::npos);
  EXPECT_EQ(scrapes, 0);
}

TEST(MetricsEndpointTest, AnAddressInUseIsUnavailableNamingIt) {
  auto first = MetricsEndpoint::Create({.listen = "127.0.0.1:0"}, [] { return std::string(); });
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = MetricsEndpoint::Create({.listen = taken}, [] { return std::string(); });
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_NE(second.status().message().find(taken), std::string::npos) << second.status();
}

TEST(MetricsEndpointTest, AListenWithoutAPortIsInvalidNamingTheFlag) {
  auto endpoint = MetricsEndpoint::Create({.listen = "localhost"}, [] { return std::string(); });
  EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(endpoint.status().message().find("metrics-listen"), std::string::npos)
      << endpoint.status();
}

// Served concurrently: a scrape is answered while an idle connection, accepted
// before it and far from its deadline, is still waiting for its request.
TEST(MetricsEndpointTest, AnIdleConnectionDoesNotDelayAnotherScrape) {
  auto endpoint = Start(4, 600, Scrape);
  ASSERT_NE(endpoint, nullptr);
  const int idle = Connect(endpoint->port());
  ASSERT_GE(idle, 0);
  EXPECT_NE(HttpGet(endpoint->port(), "/metrics").find("200 OK"), std::string::npos);
  EXPECT_TRUE(StillOpenAndSilent(idle));
  close(idle);
}

// A client sending its request a byte at a time: every scrape between its bytes
// is answered, and its own request is answered once whole.
TEST(MetricsEndpointTest, ASlowDripClientDoesNotDelayOtherScrapes) {
  auto endpoint = Start(4, 600, Scrape);
  ASSERT_NE(endpoint, nullptr);
  const int drip = Connect(endpoint->port());
  ASSERT_GE(drip, 0);
  const std::string request = "GET /metrics HTTP/1.0\r\n\r\n";
  for (size_t i = 0; i < request.size(); ++i) {
    ASSERT_TRUE(Send(drip, request.substr(i, 1)));
    if (i + 1 == request.size()) break;
    if (i % 4 == 0) {
      EXPECT_NE(HttpGet(endpoint->port(), "/metrics").find("arbiter_serving 1"), std::string::npos)
          << "after byte " << i;
      EXPECT_TRUE(StillOpenAndSilent(drip)) << "after byte " << i;
    }
  }
  EXPECT_NE(ReadUntilClosed(drip).find("arbiter_serving 1"), std::string::npos);
  close(drip);
}

TEST(MetricsEndpointTest, AConnectionIsClosedAtItsDeadlineWhetherIdleOrDripping) {
  auto endpoint = Start(4, 0.2, Scrape);
  ASSERT_NE(endpoint, nullptr);
  const int idle = Connect(endpoint->port());
  const int drip = Connect(endpoint->port());
  ASSERT_GE(idle, 0);
  ASSERT_GE(drip, 0);
  ASSERT_TRUE(Send(drip, "GET /met"));
  EXPECT_EQ(ReadUntilClosed(idle), "");  // closed unanswered (not left open until the bound)
  EXPECT_EQ(ReadUntilClosed(drip), "");
  EXPECT_FALSE(StillOpenAndSilent(idle));
  EXPECT_FALSE(StillOpenAndSilent(drip));
  close(idle);
  close(drip);
}

TEST(MetricsEndpointTest, ConnectionsOverTheCapAreRefusedWith503AndTheCapFreesAsTheyClose) {
  auto endpoint = Start(2, 600, Scrape);
  ASSERT_NE(endpoint, nullptr);
  const int first = Connect(endpoint->port());
  const int second = Connect(endpoint->port());
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  // Answered at once, before it sends anything.
  const int third = Connect(endpoint->port());
  ASSERT_GE(third, 0);
  const std::string refused = ReadUntilClosed(third);
  close(third);
  EXPECT_NE(refused.find("503 Service Unavailable"), std::string::npos) << refused;
  EXPECT_TRUE(StillOpenAndSilent(first));
  close(first);
  // The endpoint learns of the close on its next poll; a scrape is answered
  // once it has (bounded wait on the observable answer, not a fixed sleep).
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    answer = HttpGet(endpoint->port(), "/metrics");
  } while (answer.find("200 OK") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer;
  close(second);
}

// Destroying the endpoint (as the daemon's shutdown does) closes what clients
// hold open instead of waiting for them.
TEST(MetricsEndpointTest, DestructionDoesNotWaitForAClientMidRequest) {
  auto endpoint = Start(4, 600, Scrape);
  ASSERT_NE(endpoint, nullptr);
  const int drip = Connect(endpoint->port());
  ASSERT_GE(drip, 0);
  ASSERT_TRUE(Send(drip, "GET /metr"));
  endpoint.reset();
  EXPECT_EQ(ReadUntilClosed(drip), "");
  EXPECT_FALSE(StillOpenAndSilent(drip));
  close(drip);
}

TEST(MetricsEndpointTest, ARequestOverTheSizeLimitIsRefused) {
  const MetricsEndpointOptions defaults;
  auto endpoint = Start(defaults.max_connections, defaults.request_seconds, Scrape);
  ASSERT_NE(endpoint, nullptr);
  const int fd = Connect(endpoint->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(Send(fd, "GET /metrics HTTP/1.0\r\nX-Padding: " + std::string(9000, 'x')));
  EXPECT_NE(ReadUntilClosed(fd).find("431"), std::string::npos);
  close(fd);
}

}  // namespace
}  // namespace arbiter::server
