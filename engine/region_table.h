// Regions: client memory the daemon has mapped (Backend::MapRegion) so that
// Matmuls name byte offsets in it instead of carrying bytes. Each region
// belongs to the peer that registered it: another peer naming it is told
// NOT_FOUND (the id of someone else's region is not confirmed to exist). It is
// released when its owner unregisters it, when the owner's session ends
// (ReleaseOwner), or when the table is destroyed; a dispatch still using it
// holds it (shared_ptr) until that dispatch ends, so memory is never unmapped
// under a running kernel.
//
// Quotas, per Peer::quota_key(): at most `max_regions_per_peer` regions and
// `max_bytes_per_peer` bytes; past either, RESOURCE_EXHAUSTED naming the quota,
// checked before anything is mapped.
//
// Ownership: owns the regions (their mappings); borrows the backend.
// Thread-safe: provides internal synchronization (one mutex over the table;
// mapping and unmapping happen outside it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/owned_map.h"
#include "engine/peer.h"
#include "engine/status.h"

namespace arbiter {

struct RegionQuota {
  int64_t max_regions_per_peer = 256;
  int64_t max_bytes_per_peer = 0;  // 0: no byte quota
  // Bytes of host-memory regions (kHostMemfd) per process, within max_bytes_per_peer:
  // a GPU backend page-locks them, and page-locked memory is the host's to run out
  // of, not the device's. 0: no quota of their own.
  int64_t max_host_bytes_per_peer = 0;
};

struct RegionInfo {
  std::string id;  // "r" and 16 hex digits, never reused by this daemon
  RegionKind kind = RegionKind::kHostMemfd;
  int64_t bytes = 0;
  std::string label;
  Peer owner;
  int64_t created_unix = 0;
};

// A mapped region; immutable once registered.
struct Region {
  RegionInfo info;
  std::unique_ptr<Buffer> memory;
};

class RegionTable {
 public:
  RegionTable(Backend& backend, RegionQuota quota);
  RegionTable(const RegionTable&) = delete;
  RegionTable& operator=(const RegionTable&) = delete;

  // Checks the quota, maps `source` and records it for `owner`. `label` is
  // kept for listings (INVALID_ARGUMENT past 128 bytes).
  absl::StatusOr<RegionInfo> Register(const Peer& owner, const RegionSource& source,
                                      std::string label);
  // NOT_FOUND unless `peer` owns region `id`.
  absl::Status Unregister(const Peer& peer, const std::string& id);
  // `peer`'s region `id`, held for the caller's use; NOT_FOUND otherwise.
  absl::StatusOr<std::shared_ptr<const Region>> Find(const Peer& peer, const std::string& id) const;
  // Every region when `owner` is null, else that owner's.
  std::vector<RegionInfo> List(const Peer* owner) const;
  // Releases every region of Peer::owner() `owner`; returns how many.
  int ReleaseOwner(const std::string& owner);
  ResidencyTotals Totals() const;

 private:
  struct Usage {
    int64_t regions = 0;
    int64_t bytes = 0;
    int64_t host_bytes = 0;  // of them, in host-memory regions
  };

  // Gives back what Register reserved for `key` for a region of `kind` and `bytes`.
  void Unreserve(const std::string& key, RegionKind kind, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Backend& backend_;
  const RegionQuota quota_;
  mutable absl::Mutex mu_;
  OwnedMap<Region> regions_ ABSL_GUARDED_BY(mu_);
  // Per quota key, registered plus being mapped (reserved before MapRegion).
  std::map<std::string, Usage> usage_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace arbiter
