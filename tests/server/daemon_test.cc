// The daemon composed in-process: ephemeral port, health, shutdown, and the
// limits its options hand the engine.
#include "server/daemon.h"

#include <string_view>
#include <utility>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/arbiter_client.h"

namespace arbiter::server {
namespace {

DaemonOptions InProcessOptions() {
  DaemonOptions options;
  options.listen = "127.0.0.1:0";
  options.store_path = ":memory:";
  options.backend = BackendKind::kCpu;
  options.shutdown_grace_seconds = 5;
  return options;
}

TEST(DaemonTest, EphemeralPortIsBoundAndReportedServing) {
  auto daemon = Daemon::Create(InProcessOptions());
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_GT((*daemon)->port(), 0);
  client::ClientOptions options;
  options.server = "127.0.0.1:" + std::to_string((*daemon)->port());
  client::ArbiterClient client(options);
  for (const char* service : {"", "arbiter.v1.Dispatch", "arbiter.v1.Admin"}) {
    client::HealthStatus status;
    ASSERT_TRUE(client.Health(service, &status).ok()) << service;
    EXPECT_EQ(status, client::HealthStatus::kServing) << service;
  }
}

TEST(DaemonTest, AfterShutdownTheServerNoLongerAnswers) {
  auto daemon = Daemon::Create(InProcessOptions());
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  client::ClientOptions options;
  options.server = "127.0.0.1:" + std::to_string((*daemon)->port());
  options.deadline_seconds = 5;
  client::ArbiterClient client(options);
  v1::ServerInfoResponse info;
  ASSERT_TRUE(client.ServerInfo(&info).ok());
  (*daemon)->Shutdown();
  (*daemon)->Shutdown();  // idempotent
  client::HealthStatus status;
  EXPECT_FALSE(client.Health("", &status).ok());
}

// One HTTP/1.1 request to 127.0.0.1:port; the raw response.
std::string HttpGet(int port, const std::string& path) {
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

TEST(DaemonTest, MetricsAreServedOverHttpWhenAsked) {
  DaemonOptions options = InProcessOptions();
  options.metrics_listen = "127.0.0.1:0";
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_GT((*daemon)->metrics_port(), 0);
  const std::string scrape = HttpGet((*daemon)->metrics_port(), "/metrics");
  EXPECT_NE(scrape.find("200 OK"), std::string::npos) << scrape.substr(0, 200);
  EXPECT_NE(scrape.find("arbiter_serving 1"), std::string::npos) << scrape;
  EXPECT_NE(HttpGet((*daemon)->metrics_port(), "/other").find("404"), std::string::npos);
}

TEST(DaemonTest, ANonLoopbackListenerWithoutAnAdminTokenIsRefused) {
  DaemonOptions options = InProcessOptions();
  options.listen = "0.0.0.0:0";
  auto daemon = Daemon::Create(options);
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(daemon.status().message().find("--admin-token-file"), std::string::npos)
      << daemon.status();
}

TEST(DaemonTest, BackendNamesParseToTheirKindAndOthersAreRefusedNamingTheChoices) {
  const std::pair<std::string_view, BackendKind> names[] = {
      {"auto", BackendKind::kAuto}, {"cpu", BackendKind::kCpu}, {"cuda", BackendKind::kCuda}};
  for (const auto& [name, kind] : names) {
    const absl::StatusOr<BackendKind> parsed = ParseBackendKind(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kind) << name;
    EXPECT_EQ(BackendKindName(kind), name);
  }
  const absl::StatusOr<BackendKind> tpu = ParseBackendKind("tpu");
  EXPECT_EQ(tpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tpu.status().message(), R"(backend: expected auto, cpu or cuda, got "tpu")");
}

TEST(DaemonTest, InvalidOptionsAreRefusedNamingTheFlag) {
  DaemonOptions options = InProcessOptions();
  options.arbiter.workers = 0;
  auto daemon = Daemon::Create(options);
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(daemon.status().message().find("workers"), std::string::npos) << daemon.status();

  options = InProcessOptions();
  options.max_message_bytes = int64_t{1} << 40;
  EXPECT_EQ(Daemon::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DaemonTest, AnAddressThatCannotBeBoundIsUnavailable) {
  auto first = Daemon::Create(InProcessOptions());
  ASSERT_TRUE(first.ok()) << first.status();
  DaemonOptions options = InProcessOptions();
  options.listen = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = Daemon::Create(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

// The limits set by flags reach the engine; bad ones are refused at start.
TEST(DaemonLimitsTest, MaxQueueReachesTheEngine) {
  DaemonOptions options = InProcessOptions();
  options.arbiter.max_queue = 3;
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ((*daemon)->arbiter().options().max_queue, 3u);
}

TEST(DaemonLimitsTest, NoisePolicyReachesTheEngine) {
  DaemonOptions options = InProcessOptions();
  options.arbiter.noise.noise_multiple = 3.5;
  options.arbiter.noise.noise_floor = 0.05;
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ((*daemon)->arbiter().options().noise.noise_multiple, 3.5);
  EXPECT_EQ((*daemon)->arbiter().options().noise.noise_floor, 0.05);
}

TEST(DaemonLimitsTest, NegativeNoiseFloorIsRefusedAtStart) {
  DaemonOptions options = InProcessOptions();
  options.arbiter.noise.noise_floor = -0.01;
  auto daemon = Daemon::Create(options);
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(daemon.status().message().find("noise-floor"), std::string::npos) << daemon.status();
}

TEST(DaemonLimitsTest, NegativeRefineThresholdIsRefusedAtStart) {
  DaemonOptions options = InProcessOptions();
  options.arbiter.refine.hot_after = -1;
  auto daemon = Daemon::Create(options);
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(daemon.status().message().find("refine-after"), std::string::npos) << daemon.status();
}

}  // namespace
}  // namespace arbiter::server
