// A session on arbiterd's fd socket: what a client on the same node needs to
// own regions (zero-copy operands) and to pass file descriptors, which gRPC
// cannot carry. The fd socket is the Unix listener's path plus ".fd"
// (ServerInfo.fd_socket says it); its protocol (server/fd_socket.h):
//
//   daemon -> client, on connect:  "SESSION <token>"
//   client -> daemon:              "FD" with one descriptor (SCM_RIGHTS)
//   daemon -> client:              "FD <n>"   or   "ERROR <why>"
//
// The token goes on every gRPC call as "arbiter-session" metadata
// (ArbiterClient does it once a session is open). The session lasts while this
// object keeps the connection open: destroying it - or the process exiting -
// ends it, and the daemon releases every region and tensor it owned.
//
// Depends only on POSIX. Thread-safe: PassFd serializes on an internal mutex;
// token() is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/support/status.h>

namespace arbiter::client {

// The metadata key the token travels under.
inline constexpr char kSessionMetadata[] = "arbiter-session";

class Session {
 public:
  // Connects to `fd_socket_path` and reads the token. UNAVAILABLE naming the
  // path when it cannot; the daemon's ERROR text otherwise.
  static grpc::Status Open(const std::string& fd_socket_path, std::unique_ptr<Session>* out);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& token() const { return token_; }
  // Passes `fd` (the caller keeps its own copy open or closes it) and returns
  // the number RegisterRegionRequest.fd names it by; each is used once.
  grpc::Status PassFd(int fd, int64_t* number);

 private:
  Session(int socket, std::string token) : socket_(socket), token_(std::move(token)) {}
  const int socket_;
  const std::string token_;
  std::mutex mu_;  // one FD exchange at a time
};

// "unix:/run/arbiter/arbiter.sock" -> "/run/arbiter/arbiter.sock.fd"; empty for
// an address that is not a Unix socket.
std::string FdSocketPathFor(const std::string& server);

}  // namespace arbiter::client
