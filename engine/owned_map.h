// What the residency tables (RegionTable, TensorTable) share: items keyed by
// id, each belonging to the peer that made it, so that one peer never finds,
// lists or releases another's. T is an item with `info.owner` (a Peer) and
// `info.bytes`; items are shared_ptrs, so one still in use by a dispatch
// outlives its removal here.
//
// Thread-safety: none; the owning table's mutex guards its OwnedMap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/peer.h"

namespace arbiter {

// Counts for metrics: all items, and per uid (a bounded label: the node's users).
struct ResidencyTotals {
  int64_t count = 0;
  int64_t bytes = 0;
  std::map<int, std::pair<int64_t, int64_t>> per_uid;  // uid -> (count, bytes)
};

// "r1f3c..." / "t9a0b...": a prefix and 16 hex digits from `rng`.
std::string RandomId(char prefix, std::mt19937_64& rng);

// INVALID_ARGUMENT for a label past 128 bytes (labels are kept for listings).
absl::Status CheckLabel(const std::string& label);

template <typename T>
class OwnedMap {
 public:
  using Ptr = std::shared_ptr<const T>;
  using Info = decltype(T::info);

  void Add(const std::string& id, Ptr item) { items_.emplace(id, std::move(item)); }

  // `peer`'s item `id`; null when there is none or it is another peer's.
  Ptr Find(const Peer& peer, const std::string& id) const {
    const auto it = items_.find(id);
    if (it == items_.end() || !it->second->info.owner.SameOwner(peer)) return nullptr;
    return it->second;
  }

  // Removes `peer`'s item `id` and returns it; null as Find.
  Ptr Take(const Peer& peer, const std::string& id) {
    const auto it = items_.find(id);
    if (it == items_.end() || !it->second->info.owner.SameOwner(peer)) return nullptr;
    Ptr item = std::move(it->second);
    items_.erase(it);
    return item;
  }

  // Removes every item of Peer::owner() `owner` and returns them.
  std::vector<Ptr> TakeOwner(const std::string& owner) {
    std::vector<Ptr> taken;
    for (auto it = items_.begin(); it != items_.end();) {
      if (it->second->info.owner.owner() != owner) {
        ++it;
        continue;
      }
      taken.push_back(std::move(it->second));
      it = items_.erase(it);
    }
    return taken;
  }

  // Every item's info when `owner` is null, else that owner's; by id.
  std::vector<Info> List(const Peer* owner) const {
    std::vector<Info> out;
    for (const auto& [id, item] : items_) {
      if (owner == nullptr || item->info.owner.SameOwner(*owner)) out.push_back(item->info);
    }
    return out;
  }

  ResidencyTotals Totals() const {
    ResidencyTotals t;
    for (const auto& [id, item] : items_) {
      ++t.count;
      t.bytes += item->info.bytes;
      auto& [count, bytes] = t.per_uid[item->info.owner.uid];
      ++count;
      bytes += item->info.bytes;
    }
    return t;
  }

 private:
  std::map<std::string, Ptr> items_;
};

}  // namespace arbiter
