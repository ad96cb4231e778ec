// The daemon composed in-process: ephemeral port, health, shutdown, and the
// limits its options hand the engine.
#include "server/daemon.h"

#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/arbiter_client.h"
#include "tests/server/metrics_scrape.h"

namespace arbiter::server {
namespace {

DaemonOptions InProcessOptions() {
  DaemonOptions options;
  options.listen = "127.0.0.1:0";
  options.store_path = ":memory:";
  options.backend = BackendKind::kCpu;
  options.shutdown_grace_seconds = 5;
  // These tests are about the daemon, not timing: no cache flush per sample
  // (a flush of 2x the last-level cache is slow under TSan).
  options.arbiter.measure.cold_cache = false;
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
  options.arbiter.workers = -1;
  auto daemon = Daemon::Create(options);
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(daemon.status().message().find("workers"), std::string::npos) << daemon.status();

  options = InProcessOptions();
  options.max_message_bytes = int64_t{1} << 40;
  EXPECT_EQ(Daemon::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DaemonTest, ADeviceThatIsNoOrdinalOrUuidOrOnTheCpuBackendIsRefusedNamingTheFlag) {
  DaemonOptions options = InProcessOptions();
  options.device = "first";
  absl::Status refused = Daemon::Create(options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("device: expected a CUDA device ordinal"), std::string::npos)
      << refused;

  options.device = "1";  // a GPU, but the backend is cpu
  refused = Daemon::Create(options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("backend is cpu"), std::string::npos) << refused;
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
TEST(DaemonLimitsTest, WorkersDefaultToTheDevicesSize) {
  auto daemon = Daemon::Create(InProcessOptions());  // workers 0: sized to the device
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ((*daemon)->arbiter().options().workers, DefaultWorkers("cpu"));
  EXPECT_EQ(DefaultWorkers("cpu"), 1);
  EXPECT_GT(DefaultWorkers("cuda"), 1) << "small requests are not queued behind one large one";
}

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

TEST(DaemonLimitsTest, RefinementSettingsReachTheEngine) {
  DaemonOptions options = InProcessOptions();
  options.arbiter.refine.max_leaders = 3;
  options.arbiter.refine.leader_margin = 0.1;
  options.arbiter.refine.max_tile_entrants = 0;
  options.arbiter.refine.device_budget_seconds = 0.005;
  options.arbiter.measure.extend_rounds = 0.5;
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const ArbiterOptions& a = (*daemon)->arbiter().options();
  EXPECT_EQ(a.refine.max_leaders, 3);
  EXPECT_EQ(a.refine.leader_margin, 0.1);
  EXPECT_EQ(a.refine.max_tile_entrants, 0);
  EXPECT_EQ(a.refine.device_budget_seconds, 0.005);
  EXPECT_EQ(a.measure.extend_rounds, 0.5);
}

TEST(DaemonLimitsTest, RefinementSettingsOutOfRangeAreRefusedAtStartNamingTheFlag) {
  const std::vector<std::pair<std::string, std::function<void(ArbiterOptions&)>>> bad = {
      {"refine-entrants", [](ArbiterOptions& a) { a.refine.max_leaders = 0; }},
      {"refine-leader-margin", [](ArbiterOptions& a) { a.refine.leader_margin = -0.1; }},
      {"refine-tile-entrants", [](ArbiterOptions& a) { a.refine.max_tile_entrants = -1; }},
      {"refine-device-budget-seconds", [](ArbiterOptions& a) { a.refine.device_budget_seconds = 0; }},
      {"close-race-rounds", [](ArbiterOptions& a) { a.measure.extend_rounds = -1; }},
  };
  for (const auto& [flag, set] : bad) {
    DaemonOptions options = InProcessOptions();
    set(options.arbiter);
    auto daemon = Daemon::Create(options);
    EXPECT_EQ(daemon.status().code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(daemon.status().message().find(flag), std::string::npos) << daemon.status();
  }
}

// The value of `series` (exact name and labels) in a scrape; -1 when absent.
double SeriesValue(const std::string& scrape, const std::string& series) {
  const size_t at = scrape.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(scrape.substr(at + series.size() + 2));
}

TEST(DaemonLimitsTest, AReplyOverTheMessageLimitIsRefusedBeforeAnyWorkAndCountedAsRefused) {
  DaemonOptions options = InProcessOptions();
  options.max_message_bytes = 64 << 10;
  options.metrics_listen = "127.0.0.1:0";
  options.arbiter.tuning = TuningPolicy::kSync;
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  client::ClientOptions client_options;
  client_options.server = "127.0.0.1:" + std::to_string((*daemon)->port());
  client::ArbiterClient client(client_options);

  // A and B are 512 bytes each; C is 128 x 128 f32 = 64 KiB, which with the
  // response's other fields cannot fit in 64 KiB.
  v1::MatmulRequest request;
  request.mutable_problem()->set_dtype(v1::DTYPE_F32);
  request.mutable_problem()->set_m(128);
  request.mutable_problem()->set_n(128);
  request.mutable_problem()->set_k(1);
  request.set_a(std::string(128 * 4, '\0'));
  request.set_b(std::string(128 * 4, '\0'));
  v1::MatmulResponse response;
  const grpc::Status status = client.Matmul(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("c is 65536 bytes"), std::string::npos) << status.error_message();
  EXPECT_NE(status.error_message().find("--max-message-bytes 65536"), std::string::npos)
      << status.error_message();

  // Refused before any work: nothing measured, no dispatch; the RPC is counted
  // with the code the client received.
  EXPECT_EQ((*daemon)->arbiter().measurements(), 0);
  const std::string scrape = HttpGet((*daemon)->metrics_port(), "/metrics");
  EXPECT_EQ(SeriesValue(scrape, R"(arbiter_rpcs_total{code="RESOURCE_EXHAUSTED",method="Matmul"})"), 1)
      << scrape;
  EXPECT_EQ(SeriesValue(scrape, R"(arbiter_rpcs_total{code="OK",method="Matmul"})"), 0);
  EXPECT_EQ(scrape.find(R"(outcome="OK"} 1)"), std::string::npos) << "a dispatch was counted";

  // Half the rows fit: the same request shape, answered.
  request.mutable_problem()->set_m(64);
  request.set_a(std::string(64 * 4, '\0'));
  EXPECT_TRUE(client.Matmul(request, &response).ok());
  EXPECT_EQ(response.c().size(), 64u * 128 * 4);
}

TEST(DaemonLimitsTest, OperandByteLimitReachesTheEngineAndOversizedValuesAreRefused) {
  DaemonOptions options = InProcessOptions();
  options.arbiter.limits.max_operand_bytes = 1 << 20;
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ((*daemon)->arbiter().options().limits.max_operand_bytes, 1 << 20);
  EXPECT_GT((*daemon)->arbiter().options().limits.max_device_bytes, 0) << "the device's memory";

  options.arbiter.limits.max_operand_bytes = (int64_t{1} << 31) + 1;
  const auto refused = Daemon::Create(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("max-operand-bytes"), std::string::npos) << refused.status();
}

TEST(DaemonTest, ServesOnAUnixSocketNextToTcpAndThePortFileNamesTheTcpPort) {
  const std::string dir = ::testing::TempDir() + "arbiter-unix-" + std::to_string(getpid());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  DaemonOptions options = InProcessOptions();
  options.listen = "127.0.0.1:0,unix:" + dir + "/a.sock";
  options.port_file = dir + "/port";
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  for (const std::string& address :
       {"unix:" + dir + "/a.sock", "127.0.0.1:" + std::to_string((*daemon)->port())}) {
    client::ClientOptions client_options;
    client_options.server = address;
    client::ArbiterClient client(client_options);
    client::HealthStatus health;
    ASSERT_TRUE(client.Health("", &health).ok()) << address;
    EXPECT_EQ(health, client::HealthStatus::kServing) << address;
  }
  std::ifstream port_file(dir + "/port");
  std::string text;
  std::getline(port_file, text);
  EXPECT_EQ(text, std::to_string((*daemon)->port()));
}

TEST(DaemonTest, AUnixOnlyDaemonWritesItsAddressToThePortFile) {
  const std::string dir = ::testing::TempDir() + "arbiter-unix1-" + std::to_string(getpid());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  DaemonOptions options = InProcessOptions();
  options.listen = "unix:" + dir + "/only.sock";
  options.port_file = dir + "/port";
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ((*daemon)->port(), 0);
  std::ifstream port_file(dir + "/port");
  std::string text;
  std::getline(port_file, text);
  EXPECT_EQ(text, "unix:" + dir + "/only.sock") << "not a bogus port";
}

TEST(DaemonTest, ListenersAreCommaSeparatedAndUnixAddressesNeedAPath) {
  const auto two = ParseListeners("127.0.0.1:0,unix:/tmp/a.sock");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, (std::vector<std::string>{"127.0.0.1:0", "unix:/tmp/a.sock"}));
  for (const char* bad : {"", "127.0.0.1:0,", ",unix:/x", "unix:"}) {
    EXPECT_EQ(ParseListeners(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace arbiter::server
