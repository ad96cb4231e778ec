// Completion by event (MatmulRequest.completion = EVENT): each peer gets a
// fixed ring of events the backend shares with it once (Backend::
// CreateSharedEvents, on the peer's first need), and a dispatch that asks for
// one records a free slot after its kernel and returns without waiting; the
// client waits on that slot's event before it reads C.
//
// The reuse rule, which makes recording a slot again safe: a slot handed to a
// dispatch stays taken until the peer acknowledges it (Acknowledge, from a
// later request's done_event_slots) - the client acknowledges only once its
// own wait on the event is enqueued or has returned, and a wait already
// enqueued is not moved by a later record. With every slot taken, Claim is
// RESOURCE_EXHAUSTED: nothing is recorded twice behind a client's back.
//
// A slot also keeps what its dispatch held (the regions its operands live in)
// until it is recorded again, the peer unregisters a region (Settle) or its
// events are released, and the host waits for the slot's last record before
// dropping them: a region is never unmapped under a kernel still running.
//
// Ownership: owns each peer's events (shared_ptr, so a claim in flight keeps
// them alive past ReleaseOwner); borrows the backend.
// Thread-safe: provides internal synchronization (one mutex over the table and
// the slots' states; events are recorded and waited on outside it, only by the
// claim that holds the slot).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/backend.h"
#include "engine/peer.h"
#include "engine/status.h"

namespace arbiter {

// Slots per peer: how many Matmuls one session may have completing by event
// at once, unacknowledged.
inline constexpr size_t kCompletionSlotsPerPeer = 16;

class CompletionTable {
 private:
  struct Pool;

 public:
  // A slot taken for one dispatch. Commit once the event is recorded; dropped
  // uncommitted (the dispatch failed before recording), the slot is free again.
  class Claim {
   public:
    Claim() = default;
    Claim(Claim&& other) noexcept;
    Claim& operator=(Claim&& other) noexcept;
    ~Claim();

    SharedEvents& events() const;
    size_t slot() const { return slot_; }
    // The event is recorded: the slot stays taken until acknowledged, and keeps
    // `hold` (what the dispatch used) until its next record or the pool's end.
    void Commit(std::vector<std::shared_ptr<const void>> hold);

   private:
    friend class CompletionTable;
    Claim(std::shared_ptr<Pool> pool, size_t slot) : pool_(std::move(pool)), slot_(slot) {}
    void Release();

    std::shared_ptr<Pool> pool_;
    size_t slot_ = 0;
  };

  explicit CompletionTable(Backend& backend, size_t slots_per_peer = kCompletionSlotsPerPeer);
  CompletionTable(const CompletionTable&) = delete;
  CompletionTable& operator=(const CompletionTable&) = delete;

  // `peer`'s events, created on first use: slot i's handle is the i-th.
  // FAILED_PRECONDITION, saying why, where the backend shares no events.
  absl::StatusOr<std::vector<std::string>> Handles(const Peer& peer);
  // Frees `slots` (the peer has waited on them). INVALID_ARGUMENT, before any
  // is freed, for a slot outside the ring or when the peer has no events;
  // acknowledging a slot that is already free does nothing.
  absl::Status Acknowledge(const Peer& peer, absl::Span<const int> slots);
  // A free slot of `peer`'s (the lowest), its previous record complete and
  // its previous hold dropped. RESOURCE_EXHAUSTED when every slot awaits
  // acknowledgement; FAILED_PRECONDITION as Handles.
  absl::StatusOr<Claim> Take(const Peer& peer);
  // Waits for every record of `peer`'s that still holds what its dispatch
  // used, and drops those holds; the slots stay as they were. Called before a
  // region is unregistered: the client frees its memory next, and a mapping
  // kept open past that (a legacy IPC one) would refuse the next registration
  // of the same memory (cudaErrorAlreadyMapped).
  void Settle(const Peer& peer);
  // Drops `owner`'s events (its session ended); returns whether it had any.
  bool ReleaseOwner(const std::string& owner);

 private:
  // The peer's pool, created if `create`; null when absent and not created.
  absl::StatusOr<std::shared_ptr<Pool>> PoolOf(const Peer& peer, bool create);

  Backend& backend_;
  const size_t slots_per_peer_;
  absl::Mutex create_mu_;  // one creation at a time, outside mu_ (the backend may be slow)
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Pool>> pools_ ABSL_GUARDED_BY(mu_);
};

}  // namespace arbiter
