// The PostgreSQL store's change notifications, both ways: the payload a write
// sends with pg_notify on kChannel (inside its transaction, so peers hear of a
// change exactly when it commits), and a PgListener that decodes what every
// daemon on the database sends and delivers it to this store's subscribers -
// with a StoreChange::kEverything after it had to reconnect, since whatever
// was sent in between is lost.
//
// A subscription shares the subscriber list, so it may outlive this object.
//
// Thread-safe: provides internal synchronization. Callbacks run on the
// listener's thread, one at a time; a subscription's end waits for its callback.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "engine/pg_connection.h"
#include "engine/status.h"
#include "engine/verdict_store.h"

namespace arbiter {

class PgListener;

class PgChangeFeed {
 public:
  // The notification channel every daemon on the database LISTENs on.
  static constexpr char kChannel[] = "arbiter_changes";

  // LISTENs before returning, so no notification sent after this returns is missed.
  // UNAVAILABLE when the server cannot be reached.
  static absl::StatusOr<std::unique_ptr<PgChangeFeed>> Start(
      PgParams params, std::chrono::milliseconds connect_timeout);
  // Stops the listener: no deliveries from here on.
  ~PgChangeFeed();
  PgChangeFeed(const PgChangeFeed&) = delete;
  PgChangeFeed& operator=(const PgChangeFeed&) = delete;

  std::unique_ptr<StoreSubscription> Subscribe(std::function<void(const StoreChange&)> on_change);
  // Whether the listening connection is up now.
  bool connected() const;

  // Notifies kChannel of `change` inside the caller's open transaction on `conn`. `op`
  // names the write in an error.
  static absl::Status Notify(PgConnection& conn, const StoreChange& change, const std::string& op);

 private:
  struct Subscribers;
  class Subscription;

  PgChangeFeed();

  const std::shared_ptr<Subscribers> subscribers_;
  std::unique_ptr<PgListener> listener_;  // last member: stopped first
};

}  // namespace arbiter
