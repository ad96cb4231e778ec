#include "client/session.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace arbiter::client {
namespace {

// One message of the fd socket (SOCK_SEQPACKET keeps message boundaries).
grpc::Status ReceiveLine(int socket, std::string* line) {
  char text[512];
  ssize_t n;
  do {
    n = recv(socket, text, sizeof text, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        std::string("fd socket: the daemon closed the session") +
                            (n < 0 ? std::string(": ") + std::strerror(errno) : ""));
  }
  line->assign(text, static_cast<size_t>(n));
  if (line->rfind("ERROR ", 0) == 0) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "fd socket: " + line->substr(6));
  }
  return grpc::Status::OK;
}

}  // namespace

std::string FdSocketPathFor(const std::string& server) {
  constexpr std::string_view kUnix = "unix:";
  if (server.rfind(kUnix, 0) != 0) return "";
  std::string path = server.substr(kUnix.size());
  // unix:///abs/path is the URI form of unix:/abs/path.
  if (path.rfind("//", 0) == 0) path = path.substr(2);
  return path + ".fd";
}

grpc::Status Session::Open(const std::string& fd_socket_path, std::unique_ptr<Session>* out) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd_socket_path.empty() || fd_socket_path.size() >= sizeof addr.sun_path) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "fd socket path \"" + fd_socket_path + "\": expected 1.." +
                            std::to_string(sizeof addr.sun_path - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, fd_socket_path.data(), fd_socket_path.size());
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        std::string("fd socket: socket(): ") + std::strerror(errno));
  }
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string why = std::strerror(errno);
    close(s);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "fd socket: cannot connect to " + fd_socket_path + ": " + why +
                            " (does the daemon listen on the matching unix: address?)");
  }
  std::string line;
  if (grpc::Status st = ReceiveLine(s, &line); !st.ok()) {
    close(s);
    return st;
  }
  constexpr std::string_view kSession = "SESSION ";
  if (line.rfind(kSession, 0) != 0 || line.size() == kSession.size()) {
    close(s);
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "fd socket: expected \"SESSION <token>\", got \"" + line + "\"");
  }
  out->reset(new Session(s, line.substr(kSession.size())));
  return grpc::Status::OK;
}

Session::~Session() { close(socket_); }

grpc::Status Session::PassFd(int fd, int64_t* number) {
  std::lock_guard<std::mutex> lock(mu_);
  char text[] = "FD";
  iovec iov{text, 2};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t sent;
  do {
    sent = sendmsg(socket_, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        std::string("fd socket: cannot pass the descriptor: ") + std::strerror(errno));
  }
  std::string line;
  if (grpc::Status st = ReceiveLine(socket_, &line); !st.ok()) return st;
  long long n = 0;
  char tail = 0;
  if (std::sscanf(line.c_str(), "FD %lld%c", &n, &tail) != 1 || n <= 0) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "fd socket: expected \"FD <n>\", got \"" + line + "\"");
  }
  *number = n;
  return grpc::Status::OK;
}

}  // namespace arbiter::client
