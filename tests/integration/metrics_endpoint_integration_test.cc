// The real arbiterd's /metrics endpoint under clients that stall: SIGTERM is
// not held by a client sending its request a byte at a time.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/daemon_fixture.h"

namespace arbiter::testing {
namespace {

class MetricsEndpointIntegrationTest : public DaemonFixture {
 protected:
  void SetUp() override {
    extra_args_ = {"--metrics-listen=127.0.0.1:0", "--shutdown-grace-seconds=1"};
    DaemonFixture::SetUp();
  }

  // The port arbiterd logged for /metrics; 0 when it did not.
  int MetricsPort() {
    std::smatch m;
    const std::string log = daemon_->ReadLog();
    if (!std::regex_search(log, m, std::regex(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)"))) {
      return 0;
    }
    return std::stoi(m[1]);
  }
};

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
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

TEST_F(MetricsEndpointIntegrationTest, SigtermIsNotHeldByASlowDripClient) {
  const int port = MetricsPort();
  ASSERT_GT(port, 0) << daemon_->ReadLog();
  const int idle = Connect(port);
  const int drip = Connect(port);
  ASSERT_GE(idle, 0);
  ASSERT_GE(drip, 0);
  client_.reset();
  // SIGTERM, then: while arbiterd has not exited within a second, the client
  // sends one more byte of a request it never finishes (each byte well within
  // any read timeout, so a per-read timeout alone would hold the daemon forever).
  int status = -1;
  int bytes = 0;
  const std::string endless = "GET /metrics?padding=" + std::string(200, 'x');
  for (; bytes < 60 && status == -1; ++bytes) {
    status = daemon_->Terminate(/*timeout_seconds=*/1);
    if (status == -1) send(drip, &endless[bytes % endless.size()], 1, MSG_NOSIGNAL);
  }
  EXPECT_EQ(status, 0) << "arbiterd still running after " << bytes << " bytes dripped over "
                       << bytes << " s; log:\n"
                       << daemon_->ReadLog();
  close(idle);
  close(drip);
}

}  // namespace
}  // namespace arbiter::testing
