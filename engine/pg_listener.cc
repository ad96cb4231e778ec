#include "engine/pg_listener.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace arbiter {

absl::StatusOr<std::unique_ptr<PgListener>> PgListener::Start(PgParams params,
                                                              PgListenerOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn, PgConnection::Connect(params));
  RETURN_IF_ERROR(Listen(*conn, options.channel));
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    return absl::InternalError(absl::StrCat("listener: eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<PgListener> listener(
      new PgListener(std::move(params), std::move(options), wake_fd, std::move(conn)));
  listener->connected_ = true;
  listener->thread_ = std::thread([l = listener.get()] { l->Run(); });
  return listener;
}

PgListener::PgListener(PgParams params, PgListenerOptions options, int wake_fd,
                       std::unique_ptr<PgConnection> conn)
    : params_(std::move(params)),
      options_(std::move(options)),
      wake_fd_(wake_fd),
      conn_(std::move(conn)) {}

PgListener::~PgListener() {
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    spdlog::error("verdict store listener: cannot wake its thread: {}", std::strerror(errno));
  }
  if (thread_.joinable()) thread_.join();
  close(wake_fd_);
}

absl::Status PgListener::Listen(PgConnection& conn, const std::string& channel) {
  // The channel is ours (a constant identifier), never user input, so it is quoted, not bound.
  const std::string sql = absl::StrCat("LISTEN \"", channel, "\"");
  return conn.Exec(absl::StrCat("listen on ", channel), sql.c_str()).status();
}

bool PgListener::Sleep(std::chrono::milliseconds d) {
  pollfd fd = {wake_fd_, POLLIN, 0};
  return poll(&fd, 1, static_cast<int>(d.count())) > 0;
}

bool PgListener::Drain() {
  if (PQconsumeInput(conn_->get()) != 1) return false;
  while (PGnotify* n = PQnotifies(conn_->get())) {
    const std::string payload = n->extra ? n->extra : "";
    PQfreemem(n);
    options_.on_notify(payload);
  }
  return PQstatus(conn_->get()) == CONNECTION_OK;
}

void PgListener::Run() {
  std::chrono::milliseconds backoff(100);
  while (true) {
    if (conn_ == nullptr) {
      absl::StatusOr<std::unique_ptr<PgConnection>> conn =
          PgConnection::ConnectInterruptible(params_, wake_fd_, options_.connect_timeout);
      if (absl::IsCancelled(conn.status())) return;
      absl::Status listening = conn.ok() ? Listen(**conn, options_.channel) : conn.status();
      if (!listening.ok()) {
        spdlog::debug("verdict store listener: reconnecting: {}", listening.ToString());
        if (Sleep(backoff)) return;
        backoff = std::min(backoff * 2, options_.max_backoff);
        continue;
      }
      conn_ = std::move(*conn);
      backoff = std::chrono::milliseconds(100);
      connected_ = true;
      spdlog::info("verdict store listener: listening on {} again", options_.channel);
      options_.on_resync();
    }
    pollfd fds[2] = {{conn_->socket(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int ready = poll(fds, 2, -1);
    if (ready < 0 && errno != EINTR) {
      spdlog::error("verdict store listener: poll: {}", std::strerror(errno));
      if (Sleep(backoff)) return;
      continue;
    }
    if (fds[1].revents != 0) return;
    if (ready > 0 && !Drain()) {
      std::string why = PQerrorMessage(conn_->get());
      absl::RemoveExtraAsciiWhitespace(&why);
      spdlog::warn("verdict store listener: connection lost ({}); reconnecting", why);
      connected_ = false;
      conn_.reset();
    }
  }
}

}  // namespace arbiter
