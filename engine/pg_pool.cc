#include "engine/pg_pool.h"

#include <utility>

namespace arbiter {

PgPool::PgPool(std::shared_ptr<PgConnector> connector, std::unique_ptr<PgConnection> first,
               int size)
    : connector_(std::move(connector)) {
  idle_.reserve(static_cast<size_t>(size));
  idle_.push_back(std::move(first));
  while (static_cast<int>(idle_.size()) < size) idle_.push_back(nullptr);
}

absl::Status PgPool::WithConnection(const std::function<absl::Status(PgConnection&)>& body) {
  std::unique_ptr<PgConnection> conn;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !idle_.empty(); });
    conn = std::move(idle_.back());
    idle_.pop_back();
  }
  absl::Status status;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (conn == nullptr || !conn->StillUp()) {
      conn.reset();
      absl::StatusOr<std::unique_ptr<PgConnection>> fresh = connector_->Connect();
      if (!fresh.ok()) {
        status = fresh.status();
        break;
      }
      conn = std::move(*fresh);
    }
    status = body(*conn);
    if (!conn->broken()) break;  // answered, well or not
    conn.reset();                // lost mid-call: once more on a new connection
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(conn));
  }
  cv_.notify_one();
  return status;
}

}  // namespace arbiter
