// A fixed number of PostgreSQL connections for one store's reads and writes.
// Each is made on first use and re-made when found lost; a caller waits while
// all are in use.
//
// Thread-safe: provides internal synchronization.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/pg_connection.h"
#include "engine/status.h"

namespace arbiter {

class PgPool {
 public:
  // `size` connections (at least 1), `first` one of them, already made.
  PgPool(std::shared_ptr<PgConnector> connector, std::unique_ptr<PgConnection> first, int size);
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // Runs `body` on a pooled connection, connecting first when needed. When the
  // connection turns out to be lost, `body` runs once more on a new one (every body
  // must be safe to repeat: a write replaces, a delete deletes what is there).
  absl::Status WithConnection(const std::function<absl::Status(PgConnection&)>& body);

 private:
  const std::shared_ptr<PgConnector> connector_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<PgConnection>> idle_;  // GUARDED_BY(mu_); null: not connected
};

}  // namespace arbiter
