// The larger kernel buffers of Unix-socket connections (unix_socket_buffers.h):
// set on a Unix socket, on both ends of a client's connection to the daemon
// (the daemon's as --unix-socket-buffer-bytes says), and left alone on TCP; a
// 64 MiB request and a 16 MiB reply still cross whole.
#include "arbiter/wire/unix_socket_buffers.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/arbiter_client.h"
#include "server/daemon.h"

namespace arbiter {
namespace {

int SendBuffer(int fd) {
  int bytes = 0;
  socklen_t length = sizeof(bytes);
  EXPECT_EQ(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &length), 0);
  return bytes;
}

// The send buffer the kernel books for a request of wire::kUnixSocketBufferBytes at
// least: twice the request, or twice net.core.wmem_max where that caps it (a
// process that may force it gets the whole request).
int LeastGrantedSendBuffer() {
  std::ifstream file("/proc/sys/net/core/wmem_max");
  int wmem_max = 0;
  file >> wmem_max;
  return 2 * std::min(wire::kUnixSocketBufferBytes, wmem_max > 0 ? wmem_max : 212992);
}

TEST(UnixSocketBuffersTest, AUnixSocketGetsTheLargerBuffersAndTcpIsLeftToGrowByItself) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  const int granted = wire::SetUnixSocketBuffers(pair[0], wire::kUnixSocketBufferBytes);
  EXPECT_EQ(granted, SendBuffer(pair[0]));
  EXPECT_GE(granted, LeastGrantedSendBuffer());
  close(pair[0]);
  close(pair[1]);

  const int tcp = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(tcp, 0);
  const int before = SendBuffer(tcp);
  EXPECT_EQ(wire::SetUnixSocketBuffers(tcp, wire::kUnixSocketBufferBytes), 0);
  EXPECT_EQ(SendBuffer(tcp), before) << "a TCP socket's buffer was set: it would no longer grow";
  close(tcp);
}

// This process's Unix stream sockets bound to or connected to `path`.
struct SocketsOf {
  std::vector<int> client_ends, daemon_ends;  // connected to path; accepted on it (the daemon's)
};
SocketsOf FindSockets(const std::string& path) {
  SocketsOf found;
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_un self{}, peer{};
    socklen_t self_length = sizeof(self), peer_length = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_length) != 0 ||
        self.sun_family != AF_UNIX || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) {
      continue;  // not a connected Unix socket (a listener has no peer)
    }
    if (path == peer.sun_path) found.client_ends.push_back(fd);
    if (path == self.sun_path) found.daemon_ends.push_back(fd);
  }
  return found;
}

server::DaemonOptions UnixDaemonOptions(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "arbiter-sockbuf-" + std::to_string(getpid());
  EXPECT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  server::DaemonOptions options;
  options.listen = "unix:" + dir + "/" + name;
  options.store_path = ":memory:";
  options.backend = server::BackendKind::kCpu;
  options.shutdown_grace_seconds = 5;
  return options;
}

TEST(UnixSocketBuffersTest, BothEndsOfAUnixConnectionHaveThemAndLargeMessagesCrossWhole) {
  const std::string dir = ::testing::TempDir() + "arbiter-sockbuf-" + std::to_string(getpid());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  server::DaemonOptions options;
  options.listen = "unix:" + dir + "/d.sock";
  options.store_path = ":memory:";
  options.backend = server::BackendKind::kCpu;
  options.shutdown_grace_seconds = 5;
  auto daemon = server::Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  client::ClientOptions client_options;
  client_options.server = options.listen;
  client::ArbiterClient client(client_options);

  // 64 MiB of request: f32 1 x 1 x 8Mi, A all 1 and B all 0.5, so C is 2^22 exactly.
  const int64_t k = int64_t{8} << 20;
  v1::MatmulRequest request;
  request.mutable_problem()->set_dtype(v1::DTYPE_F32);
  request.mutable_problem()->set_m(1);
  request.mutable_problem()->set_n(1);
  request.mutable_problem()->set_k(k);
  std::vector<float> a(k, 1.0f), b(k, 0.5f);
  request.set_a(a.data(), a.size() * sizeof(float));
  request.set_b(b.data(), b.size() * sizeof(float));
  v1::MatmulResponse response;
  grpc::Status status = client.Matmul(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.c().size(), sizeof(float));
  float c = 0;
  std::memcpy(&c, response.c().data(), sizeof(c));
  EXPECT_EQ(c, static_cast<float>(k / 2));

  // 16 MiB of reply: f32 2048 x 2048 x 1, C[i][j] = A[i] * B[j].
  const int n = 2048;
  request.mutable_problem()->set_m(n);
  request.mutable_problem()->set_n(n);
  request.mutable_problem()->set_k(1);
  std::vector<float> column(n), row(n);
  for (int i = 0; i < n; ++i) column[i] = static_cast<float>(i), row[i] = static_cast<float>(i % 7 + 1);
  request.set_a(column.data(), n * sizeof(float));
  request.set_b(row.data(), n * sizeof(float));
  status = client.Matmul(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.c().size(), size_t{n} * n * sizeof(float));
  std::vector<float> got(size_t{n} * n);
  std::memcpy(got.data(), response.c().data(), response.c().size());
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) wrong += got[static_cast<size_t>(i) * n + j] != column[i] * row[j];
  }
  EXPECT_EQ(wrong, 0) << "elements of C differ from A[i] * B[j]";

  // Both ends of the connection those calls used asked for the larger buffers:
  // requests and replies cross in a few wake-ups.
  const SocketsOf sockets = FindSockets(dir + "/d.sock");
  ASSERT_FALSE(sockets.client_ends.empty()) << "no client connection to " << options.listen;
  ASSERT_FALSE(sockets.daemon_ends.empty()) << "no connection accepted on " << options.listen;
  for (int fd : sockets.client_ends) EXPECT_GE(SendBuffer(fd), LeastGrantedSendBuffer()) << "client end";
  for (int fd : sockets.daemon_ends) EXPECT_GE(SendBuffer(fd), LeastGrantedSendBuffer()) << "daemon end";
}

TEST(UnixSocketBuffersTest, ZeroLeavesTheDaemonsEndAtTheKernelsDefault) {
  server::DaemonOptions options = UnixDaemonOptions("zero.sock");
  options.unix_socket_buffer_bytes = 0;
  auto daemon = server::Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  client::ClientOptions client_options;
  client_options.server = options.listen;
  client::ArbiterClient client(client_options);
  client::HealthStatus health;
  ASSERT_TRUE(client.Health("", &health).ok());
  std::ifstream file("/proc/sys/net/core/wmem_default");
  int wmem_default = 0;
  file >> wmem_default;
  const SocketsOf sockets = FindSockets(options.listen.substr(5));
  ASSERT_FALSE(sockets.daemon_ends.empty()) << "no connection accepted on " << options.listen;
  for (int fd : sockets.daemon_ends) EXPECT_EQ(SendBuffer(fd), wmem_default) << "daemon end";
  for (int fd : sockets.client_ends) EXPECT_GE(SendBuffer(fd), LeastGrantedSendBuffer()) << "client end";

  options.unix_socket_buffer_bytes = -1;
  const auto refused = server::Daemon::Create(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("unix-socket-buffer-bytes"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace arbiter
