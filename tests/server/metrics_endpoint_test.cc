#include "server/metrics_endpoint.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

// One HTTP/1.0 request for `path` to 127.0.0.1:port; the whole response.
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) response.append(buf, n);
    }
  }
  close(fd);
  return response;
}

TEST(MetricsEndpointTest, GetMetricsAnswersWithTheScrapeOfThatMoment) {
  std::atomic<int> scrapes = 0;  // written on the endpoint's thread
  auto endpoint = MetricsEndpoint::Create("127.0.0.1:0", [&scrapes] {
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
  auto endpoint = MetricsEndpoint::Create("127.0.0.1:0", [&scrapes] {
    ++scrapes;
    return std::string();
  });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_NE(HttpGet((*endpoint)->port(), "/").find("404 Not Found"), std::string::npos);
  EXPECT_EQ(scrapes, 0);
}

TEST(MetricsEndpointTest, AnAddressInUseIsUnavailableNamingIt) {
  auto first = MetricsEndpoint::Create("127.0.0.1:0", [] { return std::string(); });
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = MetricsEndpoint::Create(taken, [] { return std::string(); });
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_NE(second.status().message().find(taken), std::string::npos) << second.status();
}

TEST(MetricsEndpointTest, AListenWithoutAPortIsInvalidNamingTheFlag) {
  auto endpoint = MetricsEndpoint::Create("localhost", [] { return std::string(); });
  EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(endpoint.status().message().find("metrics-listen"), std::string::npos)
      << endpoint.status();
}

}  // namespace
}  // namespace arbiter::server
