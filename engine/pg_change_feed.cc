#include "engine/pg_change_feed.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "engine/bucket.h"
#include "engine/dtype.h"
#include "engine/pg_listener.h"

namespace arbiter {
namespace {

// Notification payload: format version, what, dtype or "*", bucket or "*", origin,
// fingerprint - tab-separated, the fingerprint last since it may hold anything.
constexpr char kPayloadVersion[] = "1";

std::string EncodeChange(const StoreChange& c) {
  std::string origin = c.origin;
  absl::StrReplaceAll({{"\t", " "}}, &origin);
  return absl::StrCat(kPayloadVersion, "\t", StoreChangeWhatName(c.what), "\t",
                      c.dtype ? DTypeName(*c.dtype) : "*", "\t",
                      c.bucket ? c.bucket->ToString() : "*", "\t", origin, "\t", c.fingerprint);
}

// A payload this build cannot read (a newer daemon's format) drops everything:
// safe, since a notification only ever says what may be stale.
StoreChange DecodeChange(const std::string& payload) {
  std::vector<std::string> parts = absl::StrSplit(payload, absl::MaxSplits('\t', 5));
  StoreChange c;
  if (parts.size() != 6 || parts[0] != kPayloadVersion) return c;
  for (StoreChange::What what :
       {StoreChange::What::kVerdicts, StoreChange::What::kForces, StoreChange::What::kQuarantine}) {
    if (parts[1] == StoreChangeWhatName(what)) c.what = what;
  }
  if (c.what == StoreChange::What::kEverything) return c;
  if (parts[2] != "*") {
    c.dtype = ParseDType(parts[2]);
    if (!c.dtype) return StoreChange{};
  }
  if (parts[3] != "*") {
    c.bucket = ParseBucket(parts[3]);
    if (!c.bucket) return StoreChange{};
  }
  c.origin = parts[4];
  c.fingerprint = parts[5];
  return c;
}

}  // namespace

// Callbacks registered by Subscribe, called on the listener thread.
struct PgChangeFeed::Subscribers {
  void Deliver(const StoreChange& change) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, callback] : callbacks) callback(change);
  }

  std::mutex mu;  // held while delivering, so a subscription's end waits for its callback
  std::map<uint64_t, std::function<void(const StoreChange&)>> callbacks;  // GUARDED_BY(mu)
  uint64_t next_id = 0;                                                   // GUARDED_BY(mu)
};

class PgChangeFeed::Subscription final : public StoreSubscription {
 public:
  Subscription(std::shared_ptr<Subscribers> subscribers, uint64_t id)
      : subscribers_(std::move(subscribers)), id_(id) {}
  ~Subscription() override {
    std::lock_guard<std::mutex> lock(subscribers_->mu);
    subscribers_->callbacks.erase(id_);
  }

 private:
  const std::shared_ptr<Subscribers> subscribers_;
  const uint64_t id_;
};

absl::StatusOr<std::unique_ptr<PgChangeFeed>> PgChangeFeed::Start(
    PgParams params, std::chrono::milliseconds connect_timeout) {
  std::unique_ptr<PgChangeFeed> feed(new PgChangeFeed());
  PgListenerOptions listen;
  listen.channel = kChannel;
  listen.connect_timeout = connect_timeout;
  listen.on_notify = [subscribers = feed->subscribers_](const std::string& payload) {
    subscribers->Deliver(DecodeChange(payload));
  };
  listen.on_resync = [subscribers = feed->subscribers_] { subscribers->Deliver(StoreChange{}); };
  ASSIGN_OR_RETURN(feed->listener_, PgListener::Start(std::move(params), std::move(listen)));
  return feed;
}

PgChangeFeed::PgChangeFeed() : subscribers_(std::make_shared<Subscribers>()) {}

PgChangeFeed::~PgChangeFeed() = default;

std::unique_ptr<StoreSubscription> PgChangeFeed::Subscribe(
    std::function<void(const StoreChange&)> on_change) {
  std::lock_guard<std::mutex> lock(subscribers_->mu);
  const uint64_t id = subscribers_->next_id++;
  subscribers_->callbacks.emplace(id, std::move(on_change));
  return std::make_unique<Subscription>(subscribers_, id);
}

bool PgChangeFeed::connected() const { return listener_->connected(); }

absl::Status PgChangeFeed::Notify(PgConnection& conn, const StoreChange& change,
                                  const std::string& op) {
  return conn
      .Exec(absl::StrCat(op, ": notify"), "SELECT pg_notify($1, $2)",
            {std::string(kChannel), EncodeChange(change)})
      .status();
}

}  // namespace arbiter
