// What a bare Unix stream socket moves, by the send buffer its writer asks for:
// the ceiling under the bytes path's wire (unix_socket_buffers.h). A child
// process writes `mib` MiB per round, non-blocking and waiting in poll() when the
// socket is full (gRPC's way); the parent reads it in 4 MiB reads and times each
// round from its go byte to the last byte.
//
//   unix-socket-rate [mib=16] [rounds=40] [sndbuf...]   (0: the kernel's default)
//
// Prints one line per send buffer: the buffer the kernel booked, median and
// minimum round, GB/s at the median, and reads and polls per round.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void WaitFor(int fd, short events) {
  pollfd p{fd, events, 0};
  poll(&p, 1, -1);
}

void Writer(int fd, size_t bytes, int rounds) {
  std::vector<char> data(bytes, 1);
  fcntl(fd, F_SETFL, O_NONBLOCK);
  for (int r = 0; r < rounds; ++r) {
    char go = 0;
    WaitFor(fd, POLLIN);
    if (read(fd, &go, 1) != 1) _exit(1);
    for (size_t at = 0; at < bytes;) {
      const ssize_t n = send(fd, data.data() + at, bytes - at, 0);
      if (n > 0) at += static_cast<size_t>(n); else WaitFor(fd, POLLOUT);
    }
  }
  _exit(0);
}

void Measure(int sndbuf, size_t bytes, int rounds) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) std::exit(1);
  if (sndbuf > 0 && setsockopt(pair[0], SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) != 0) {
    setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  }
  int booked = 0;
  socklen_t length = sizeof(booked);
  getsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &booked, &length);
  const pid_t child = fork();
  if (child == 0) Writer(pair[0], bytes, rounds);
  std::vector<char> in(4 << 20);
  fcntl(pair[1], F_SETFL, O_NONBLOCK);
  std::vector<double> seconds;
  long reads = 0, polls = 0;
  for (int r = 0; r < rounds; ++r) {
    const Clock::time_point t0 = Clock::now();
    const char go = 1;
    if (write(pair[1], &go, 1) != 1) std::exit(1);
    for (size_t at = 0; at < bytes;) {
      const ssize_t n = recv(pair[1], in.data(), std::min(in.size(), bytes - at), 0);
      if (n > 0) {
        at += static_cast<size_t>(n);
        ++reads;
      } else {
        ++polls;
        WaitFor(pair[1], POLLIN);
      }
    }
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  waitpid(child, nullptr, 0);
  close(pair[0]);
  close(pair[1]);
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf("sndbuf_booked %8d  %zu MiB  median %.2f ms  min %.2f ms  %.2f GB/s  reads/round %ld  polls/round %ld\n",
              booked, bytes >> 20, median * 1e3, seconds.front() * 1e3, bytes / median / 1e9,
              reads / rounds, polls / rounds);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 16;
  const int rounds = std::max(1, argc > 2 ? std::atoi(argv[2]) : 40);
  std::vector<int> buffers;
  for (int i = 3; i < argc; ++i) buffers.push_back(std::atoi(argv[i]));
  if (buffers.empty()) buffers = {0, 1 << 20, 4 << 20};
  for (int b : buffers) Measure(b, mib << 20, rounds);
  return 0;
}
