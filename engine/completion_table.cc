#include "engine/completion_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace arbiter {

namespace {

enum class SlotState { kFree, kClaimed, kRecorded };

}  // namespace

// One peer's ring: the events and, per slot, its state and what its last record holds.
struct CompletionTable::Pool {
  explicit Pool(std::unique_ptr<SharedEvents> e)
      : events(std::move(e)), state(events->size(), SlotState::kFree), holds(events->size()) {}
  // The holds go only once the records they cover are complete.
  ~Pool() {
    absl::MutexLock lock(&mu);
    for (size_t i = 0; i < holds.size(); ++i) {
      if (!holds[i].empty()) events->Synchronize(i).IgnoreError();  // a dead device has nothing running
    }
  }

  const std::unique_ptr<SharedEvents> events;
  absl::Mutex mu;
  std::vector<SlotState> state ABSL_GUARDED_BY(mu);
  std::vector<std::vector<std::shared_ptr<const void>>> holds ABSL_GUARDED_BY(mu);
};

CompletionTable::Claim::Claim(Claim&& other) noexcept
    : pool_(std::move(other.pool_)), slot_(other.slot_) {}

CompletionTable::Claim& CompletionTable::Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::move(other.pool_);
    slot_ = other.slot_;
  }
  return *this;
}

CompletionTable::Claim::~Claim() { Release(); }

SharedEvents& CompletionTable::Claim::events() const { return *pool_->events; }

void CompletionTable::Claim::Commit(std::vector<std::shared_ptr<const void>> hold) {
  if (pool_ == nullptr) return;
  {
    absl::MutexLock lock(&pool_->mu);
    pool_->state[slot_] = SlotState::kRecorded;
    pool_->holds[slot_].swap(hold);  // empty before: Take dropped the previous one
  }
  pool_.reset();
}

void CompletionTable::Claim::Release() {
  if (pool_ == nullptr) return;
  {
    absl::MutexLock lock(&pool_->mu);
    pool_->state[slot_] = SlotState::kFree;
  }
  pool_.reset();
}

CompletionTable::CompletionTable(Backend& backend, size_t slots_per_peer)
    : backend_(backend), slots_per_peer_(slots_per_peer) {}

absl::StatusOr<std::shared_ptr<CompletionTable::Pool>> CompletionTable::PoolOf(const Peer& peer,
                                                                               bool create) {
  const std::string owner = peer.owner();
  auto find = [&]() -> std::shared_ptr<Pool> {
    absl::MutexLock lock(&mu_);
    const auto it = pools_.find(owner);
    return it == pools_.end() ? nullptr : it->second;
  };
  if (std::shared_ptr<Pool> pool = find(); pool != nullptr || !create) return pool;
  absl::MutexLock creating(&create_mu_);
  if (std::shared_ptr<Pool> pool = find()) return pool;  // another call made it meanwhile
  ASSIGN_OR_RETURN(std::unique_ptr<SharedEvents> events, backend_.CreateSharedEvents(slots_per_peer_));
  auto pool = std::make_shared<Pool>(std::move(events));
  absl::MutexLock lock(&mu_);
  pools_[owner] = pool;
  return pool;
}

absl::StatusOr<std::vector<std::string>> CompletionTable::Handles(const Peer& peer) {
  ASSIGN_OR_RETURN(const std::shared_ptr<Pool> pool, PoolOf(peer, /*create=*/true));
  std::vector<std::string> handles;
  for (size_t i = 0; i < pool->events->size(); ++i) handles.push_back(pool->events->handle(i));
  return handles;
}

absl::Status CompletionTable::Acknowledge(const Peer& peer, absl::Span<const int> slots) {
  if (slots.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::shared_ptr<Pool> pool, PoolOf(peer, /*create=*/false));
  if (pool == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "done_event_slots: ", peer.ToString(),
        " has no completion events to acknowledge (no Matmul of its asked for completion EVENT)"));
  }
  const int size = static_cast<int>(pool->events->size());
  for (int slot : slots) {
    if (slot < 0 || slot >= size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "done_event_slots: slot ", slot, " is outside the ring (expected 0 <= slot < ", size, ")"));
    }
  }
  absl::MutexLock lock(&pool->mu);
  // A slot still being recorded is not the client's to free yet: only a reply names it.
  for (int slot : slots) {
    if (pool->state[slot] == SlotState::kRecorded) pool->state[slot] = SlotState::kFree;
  }
  return absl::OkStatus();
}

absl::StatusOr<CompletionTable::Claim> CompletionTable::Take(const Peer& peer) {
  ASSIGN_OR_RETURN(const std::shared_ptr<Pool> pool, PoolOf(peer, /*create=*/true));
  size_t slot = 0;
  {
    absl::MutexLock lock(&pool->mu);
    while (slot < pool->state.size() && pool->state[slot] != SlotState::kFree) ++slot;
    if (slot == pool->state.size()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "completion EVENT: all ", slot, " event slots of ", peer.ToString(),
          " await acknowledgement; name the slots already waited on in done_event_slots"));
    }
    pool->state[slot] = SlotState::kClaimed;
  }
  Claim claim(pool, slot);
  // Its last record is normally long complete (the client waited on it): this
  // returns at once, and only then may what that dispatch held go.
  RETURN_IF_ERROR(pool->events->Synchronize(slot));
  std::vector<std::shared_ptr<const void>> previous;
  {
    absl::MutexLock lock(&pool->mu);
    previous.swap(pool->holds[slot]);
  }
  return claim;
}

void CompletionTable::Settle(const Peer& peer) {
  absl::StatusOr<std::shared_ptr<Pool>> pool = PoolOf(peer, /*create=*/false);
  if (!pool.ok() || *pool == nullptr) return;
  std::vector<std::vector<std::shared_ptr<const void>>> dropped;
  {
    // Under the pool's lock, so no slot is recorded again meanwhile: this
    // peer's own calls wait, and only while it unregisters.
    absl::MutexLock lock(&(*pool)->mu);
    for (size_t i = 0; i < (*pool)->holds.size(); ++i) {
      if ((*pool)->holds[i].empty()) continue;
      (*pool)->events->Synchronize(i).IgnoreError();  // a dead device has nothing running
      dropped.push_back(std::move((*pool)->holds[i]));
      (*pool)->holds[i].clear();
    }
  }
}  // the regions go here, outside the lock

bool CompletionTable::ReleaseOwner(const std::string& owner) {
  std::shared_ptr<Pool> pool;
  {
    absl::MutexLock lock(&mu_);
    const auto it = pools_.find(owner);
    if (it == pools_.end()) return false;
    pool = std::move(it->second);
    pools_.erase(it);
  }
  return true;  // the pool goes with its last claim, outside the lock
}

}  // namespace arbiter
