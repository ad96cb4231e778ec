#include "engine/region_table.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace arbiter {
namespace {

absl::Status NotFound(const std::string& id, const Peer& peer) {
  return absl::NotFoundError(
      absl::StrCat("region \"", id, "\": not among the regions of ", peer.ToString()));
}

}  // namespace

RegionTable::RegionTable(Backend& backend, RegionQuota quota)
    : backend_(backend), quota_(quota), ids_(std::random_device{}()) {}

absl::StatusOr<RegionInfo> RegionTable::Register(const Peer& owner, const RegionSource& source,
                                                 std::string label) {
  if (source.bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("bytes: expected >= 1, got ", source.bytes));
  }
  RETURN_IF_ERROR(CheckLabel(label));
  const std::string key = owner.quota_key();
  {
    absl::MutexLock lock(&mu_);
    Usage& used = usage_[key];
    if (used.regions + 1 > quota_.max_regions_per_peer) {
      return absl::ResourceExhaustedError(absl::StrCat(
          owner.ToString(), " holds ", used.regions, " regions; the quota is ",
          quota_.max_regions_per_peer, " per process (--max-regions-per-peer)"));
    }
    if (quota_.max_bytes_per_peer > 0 && used.bytes + source.bytes > quota_.max_bytes_per_peer) {
      return absl::ResourceExhaustedError(absl::StrCat(
          owner.ToString(), " holds ", used.bytes, " bytes of regions; ", source.bytes,
          " more would pass the quota of ", quota_.max_bytes_per_peer,
          " bytes per process (--max-region-bytes-per-peer)"));
    }
    const bool host = source.kind == RegionKind::kHostMemfd;
    if (host && quota_.max_host_bytes_per_peer > 0 &&
        used.host_bytes + source.bytes > quota_.max_host_bytes_per_peer) {
      return absl::ResourceExhaustedError(absl::StrCat(
          owner.ToString(), " holds ", used.host_bytes, " bytes of host-memory regions; ",
          source.bytes, " more would pass the quota of ", quota_.max_host_bytes_per_peer,
          " bytes per process (--max-host-region-bytes-per-peer)"));
    }
    ++used.regions;  // reserved while mapping, outside the lock
    used.bytes += source.bytes;
    if (host) used.host_bytes += source.bytes;
  }
  absl::StatusOr<std::unique_ptr<Buffer>> memory = backend_.MapRegion(source);
  absl::MutexLock lock(&mu_);
  if (!memory.ok()) {
    Unreserve(key, source.kind, source.bytes);
    return memory.status();
  }
  auto region = std::make_shared<Region>();
  region->info.id = RandomId('r', ids_);
  region->info.kind = source.kind;
  region->info.bytes = source.bytes;
  region->info.label = std::move(label);
  region->info.owner = owner;
  region->info.created_unix = absl::ToUnixSeconds(absl::Now());
  region->memory = *std::move(memory);
  RegionInfo info = region->info;
  regions_.Add(info.id, std::move(region));
  return info;
}

void RegionTable::Unreserve(const std::string& key, RegionKind kind, int64_t bytes) {
  Usage& used = usage_[key];
  --used.regions;
  used.bytes -= bytes;
  if (kind == RegionKind::kHostMemfd) used.host_bytes -= bytes;
  if (used.regions == 0) usage_.erase(key);
}

absl::Status RegionTable::Unregister(const Peer& peer, const std::string& id) {
  std::shared_ptr<const Region> released;  // unmapped outside the lock (when its last user ends)
  absl::MutexLock lock(&mu_);
  released = regions_.Take(peer, id);
  if (released == nullptr) return NotFound(id, peer);
  Unreserve(released->info.owner.quota_key(), released->info.kind, released->info.bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Region>> RegionTable::Find(const Peer& peer,
                                                                const std::string& id) const {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<const Region> region = regions_.Find(peer, id);
  if (region == nullptr) return NotFound(id, peer);
  return region;
}

std::vector<RegionInfo> RegionTable::List(const Peer* owner) const {
  absl::MutexLock lock(&mu_);
  return regions_.List(owner);
}

int RegionTable::ReleaseOwner(const std::string& owner) {
  std::vector<std::shared_ptr<const Region>> released;
  {
    absl::MutexLock lock(&mu_);
    released = regions_.TakeOwner(owner);
    for (const auto& region : released) {
      Unreserve(region->info.owner.quota_key(), region->info.kind, region->info.bytes);
    }
  }
  return static_cast<int>(released.size());  // unmapped here, outside the lock
}

ResidencyTotals RegionTable::Totals() const {
  absl::MutexLock lock(&mu_);
  return regions_.Totals();
}

}  // namespace arbiter
