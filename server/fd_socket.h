// The fd socket: what gRPC cannot carry. Next to a Unix gRPC listener at PATH
// the daemon listens on PATH.fd (AF_UNIX, SOCK_SEQPACKET: one message per
// send, descriptors alongside). One connection is one session:
//
//   daemon -> client, on connect:  "SESSION <token>"
//   client -> daemon:              "FD" with one descriptor (SCM_RIGHTS)
//   daemon -> client:              "FD <n>"   or   "ERROR <why>"
//
// The daemon reads the connection's credentials (SO_PEERCRED: pid, uid, gid)
// when it accepts it; they are the session's peer (engine/peer.h). The client
// sends the token as "arbiter-session" metadata on its gRPC calls, and names a
// passed descriptor by its number in RegisterRegion (each is used once). The
// session lasts while the connection is open: when it closes - the client
// closes it, or its process exits - `on_end` is called with its peer, and the
// daemon releases whatever the session owned. Descriptors never claimed are
// closed with the session.
//
// The token is a capability: 128 random bits that only this connection was
// told. A process that hands it to another shares its session.
//
// Owns its listening socket (the path is unlinked at start if stale, and at
// destruction), every session's connection and pending descriptors, and one
// thread that serves them all.
// Thread-safe: Find, TakeFd, Alive and count may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/peer.h"
#include "engine/status.h"

namespace arbiter::server {

// The metadata key carrying a session token on gRPC calls.
inline constexpr char kSessionMetadata[] = "arbiter-session";

struct FdSocketOptions {
  std::string path;                 // the socket's path (the Unix listener's path + ".fd")
  int64_t max_sessions = 1024;      // connections beyond are told ERROR and closed
  int64_t max_pending_fds = 16;     // descriptors a session may hold unclaimed
};

class FdSocket {
 public:
  // Binds and listens; UNAVAILABLE naming the path when it cannot.
  static absl::StatusOr<std::unique_ptr<FdSocket>> Start(const FdSocketOptions& options,
                                                         std::function<void(const Peer&)> on_end);
  // Stops the thread and closes every session (without calling on_end: the
  // owner releases everything itself) and unlinks the path.
  ~FdSocket();
  FdSocket(const FdSocket&) = delete;
  FdSocket& operator=(const FdSocket&) = delete;

  // The session whose token this is; nullopt when there is none.
  std::optional<Peer> Find(std::string_view token) const;
  // Takes descriptor `n` passed over `peer`'s session (the caller closes it);
  // NOT_FOUND naming it when there is none.
  absl::StatusOr<int> TakeFd(const Peer& peer, int64_t n);
  bool Alive(uint64_t session) const;
  int64_t count() const;
  const std::string& path() const { return options_.path; }

 private:
  struct Session {
    int fd = -1;
    std::string token;
    Peer peer;
    std::map<int64_t, int> pending;  // number -> descriptor
    int64_t next = 1;
  };

  FdSocket(const FdSocketOptions& options, std::function<void(const Peer&)> on_end)
      : options_(options), on_end_(std::move(on_end)) {}
  void Serve();
  void Accept();
  // Answers one message of session `id`; false when the connection is over.
  bool Receive(uint64_t id, int fd);
  void End(uint64_t id);

  const FdSocketOptions options_;
  const std::function<void(const Peer&)> on_end_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: written to stop the thread
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Session> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t, std::less<>> by_token_ ABSL_GUARDED_BY(mu_);
  uint64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace arbiter::server
