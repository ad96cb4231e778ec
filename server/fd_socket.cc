#include "server/fd_socket.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace arbiter::server {
namespace {

// 128 random bits as 32 hex digits.
std::string NewToken() {
  unsigned char bits[16];
  size_t got = 0;
  while (got < sizeof bits) {
    const ssize_t n = getrandom(bits + got, sizeof bits - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  std::string token;
  char hex[3];
  for (unsigned char b : bits) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    token += hex;
  }
  return token;
}

void Send(int fd, std::string_view message) {
  (void)!send(fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FdSocket>> FdSocket::Start(const FdSocketOptions& options,
                                                          std::function<void(const Peer&)> on_end) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (options.path.empty() || options.path.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError(absl::StrCat("fd socket path \"", options.path,
                                                   "\": expected 1..", sizeof addr.sun_path - 1,
                                                   " bytes"));
  }
  std::memcpy(addr.sun_path, options.path.data(), options.path.size());
  std::unique_ptr<FdSocket> s(new FdSocket(options, std::move(on_end)));
  s->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("fd socket: socket(): ", std::strerror(errno)));
  }
  unlink(options.path.c_str());  // a stale socket of a daemon that did not stop cleanly
  if (bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(s->listen_fd_, 64) != 0) {
    return absl::UnavailableError(
        absl::StrCat("fd socket: cannot listen on ", options.path, ": ", std::strerror(errno)));
  }
  s->wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (s->wake_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("fd socket: eventfd(): ", std::strerror(errno)));
  }
  s->thread_ = std::thread([p = s.get()] { p->Serve(); });
  return s;
}

FdSocket::~FdSocket() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  absl::MutexLock lock(&mu_);
  for (auto& [id, session] : sessions_) {
    for (auto& [n, fd] : session.pending) close(fd);
    close(session.fd);
  }
  sessions_.clear();
  by_token_.clear();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(options_.path.c_str());
  }
  if (wake_fd_ >= 0) close(wake_fd_);
}

void FdSocket::Serve() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (true) {
    fds.assign({pollfd{wake_fd_, POLLIN, 0}, pollfd{listen_fd_, POLLIN, 0}});
    ids.assign(2, 0);
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, session] : sessions_) {
        fds.push_back(pollfd{session.fd, POLLIN, 0});
        ids.push_back(id);
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("fd socket {}: poll: {}; no more sessions are served", options_.path,
                    std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;  // stopping
    if (fds[1].revents & POLLIN) Accept();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      if (!Receive(ids[i], fds[i].fd)) End(ids[i]);
    }
  }
}

void FdSocket::Accept() {
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    Send(fd, absl::StrCat("ERROR cannot read the connection's credentials: ", std::strerror(errno)));
    close(fd);
    return;
  }
  Peer peer;
  peer.pid = cred.pid;
  peer.uid = static_cast<int>(cred.uid);
  peer.gid = static_cast<int>(cred.gid);
  std::string token = NewToken();
  {
    absl::MutexLock lock(&mu_);
    if (static_cast<int64_t>(sessions_.size()) >= options_.max_sessions) {
      Send(fd, absl::StrCat("ERROR ", sessions_.size(), " sessions are open; the limit is ",
                            options_.max_sessions));
      close(fd);
      return;
    }
    peer.session = next_session_++;
    Session& session = sessions_[peer.session];
    session.fd = fd;
    session.token = token;
    session.peer = peer;
    by_token_[token] = peer.session;
  }
  Send(fd, absl::StrCat("SESSION ", token));
  spdlog::info("{} opened over {}", peer.ToString(), options_.path);
}

bool FdSocket::Receive(uint64_t id, int fd) {
  char text[256];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  iovec iov{text, sizeof text - 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) return false;  // closed (0) or broken
  std::vector<int> passed;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int passed_fd;
      std::memcpy(&passed_fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      passed.push_back(passed_fd);
    }
  }
  const std::string_view message(text, static_cast<size_t>(n));
  auto refuse = [&](const std::string& why) {
    for (int p : passed) close(p);
    Send(fd, absl::StrCat("ERROR ", why));
    return true;
  };
  if ((msg.msg_flags & MSG_CTRUNC) != 0) return refuse("send one descriptor per FD message");
  if (message != "FD") return refuse(absl::StrCat("expected \"FD\" with one descriptor, got a message of ", n, " bytes"));
  if (passed.size() != 1) {
    return refuse(absl::StrCat("an FD message carries exactly one descriptor, got ", passed.size()));
  }
  absl::MutexLock lock(&mu_);
  const auto found = sessions_.find(id);
  if (found == sessions_.end()) return refuse("the session is over");
  Session& session = found->second;
  if (static_cast<int64_t>(session.pending.size()) >= options_.max_pending_fds) {
    return refuse(absl::StrCat(session.pending.size(),
                               " descriptors passed and not yet registered; the limit is ",
                               options_.max_pending_fds));
  }
  const int64_t number = session.next++;
  session.pending[number] = passed[0];
  Send(fd, absl::StrCat("FD ", number));
  return true;
}

void FdSocket::End(uint64_t id) {
  Session ended;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    ended = std::move(it->second);
    sessions_.erase(it);
    by_token_.erase(ended.token);
  }
  for (auto& [n, fd] : ended.pending) close(fd);
  close(ended.fd);
  spdlog::info("{} ended", ended.peer.ToString());
  if (on_end_) on_end_(ended.peer);
}

std::optional<Peer> FdSocket::Find(std::string_view token) const {
  absl::MutexLock lock(&mu_);
  const auto it = by_token_.find(token);
  if (it == by_token_.end()) return std::nullopt;
  return sessions_.at(it->second).peer;
}

absl::StatusOr<int> FdSocket::TakeFd(const Peer& peer, int64_t n) {
  absl::MutexLock lock(&mu_);
  auto session = sessions_.find(peer.session);
  if (session != sessions_.end()) {
    auto it = session->second.pending.find(n);
    if (it != session->second.pending.end()) {
      const int fd = it->second;
      session->second.pending.erase(it);
      return fd;
    }
  }
  return absl::NotFoundError(absl::StrCat("fd: ", n, " is not a descriptor ", peer.ToString(),
                                          " passed over ", options_.path,
                                          " and has not registered yet (each is used once)"));
}

bool FdSocket::Alive(uint64_t session) const {
  absl::MutexLock lock(&mu_);
  return sessions_.contains(session);
}

int64_t FdSocket::count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(sessions_.size());
}

}  // namespace arbiter::server
