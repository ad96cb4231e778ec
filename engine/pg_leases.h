// The PostgreSQL store's leases: single flight per (fingerprint, dtype, bucket,
// scope) across every daemon on the database, as pg_try_advisory_lock on a 64-bit
// hash of the key, on one dedicated connection. The server releases a lock when
// that connection ends, so a daemon killed while measuring blocks no one; within
// this process a lease is exclusive by its key (a session lock is re-entrant, so
// the process keeps its own holders apart).
//
// A lease shares the connection's state, so it may outlive this object.
//
// Thread-safe: provides internal synchronization.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/bucket.h"
#include "engine/dtype.h"
#include "engine/status.h"
#include "engine/verdict.h"
#include "engine/verdict_store.h"

namespace arbiter {

class PgConnector;

class PgLeases {
 public:
  explicit PgLeases(std::shared_ptr<PgConnector> connector);
  ~PgLeases();
  PgLeases(const PgLeases&) = delete;
  PgLeases& operator=(const PgLeases&) = delete;

  // A held lease, or null when another holder (here or on another daemon) has it.
  // UNAVAILABLE when the server cannot be reached.
  absl::StatusOr<std::unique_ptr<StoreLease>> TryLease(const std::string& fingerprint, DType dtype,
                                                       const Bucket& bucket,
                                                       const VerdictScope& scope);

  // The 64-bit advisory lock key of a lease (FNV-1a of the key text): the same on every
  // daemon, whatever its build.
  static int64_t Key(const std::string& fingerprint, DType dtype, const Bucket& bucket,
                     const VerdictScope& scope = VerdictScope());

 private:
  struct Connection;
  class Lease;

  const std::shared_ptr<Connection> connection_;
};

}  // namespace arbiter
