#include "engine/region_table.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace arbiter {
namespace {

constexpr size_t kMaxLabelBytes = 128;

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status NotFound(const std::string& id, const Peer& peer) {
  return absl::NotFoundError(
      absl::StrCat("region \"", id, "\": not among the regions of ", peer.ToString()));
}

}  // namespace

std::string RandomId(char prefix, std::mt19937_64& rng) {
  char text[18];
  std::snprintf(text, sizeof text, "%c%016" PRIx64, prefix, static_cast<uint64_t>(rng()));
  return text;
}

RegionTable::RegionTable(Backend& backend, RegionQuota quota)
    : backend_(backend), quota_(quota), ids_(std::random_device{}()) {}

absl::StatusOr<RegionInfo> RegionTable::Register(const Peer& owner, const RegionSource& source,
                                                 std::string label) {
  if (source.bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("bytes: expected >= 1, got ", source.bytes));
  }
  if (label.size() > kMaxLabelBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("label: expected at most ", kMaxLabelBytes, " bytes, got ", label.size()));
  }
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
    ++used.regions;  // reserved while mapping, outside the lock
    used.bytes += source.bytes;
  }
  absl::StatusOr<std::unique_ptr<Buffer>> memory = backend_.MapRegion(source);
  absl::MutexLock lock(&mu_);
  if (!memory.ok()) {
    Usage& used = usage_[key];
    --used.regions;
    used.bytes -= source.bytes;
    if (used.regions == 0) usage_.erase(key);
    return memory.status();
  }
  auto region = std::make_shared<Region>();
  region->info.id = RandomId('r', ids_);
  region->info.kind = source.kind;
  region->info.bytes = source.bytes;
  region->info.label = std::move(label);
  region->info.owner = owner;
  region->info.created_unix = NowUnix();
  region->memory = *std::move(memory);
  RegionInfo info = region->info;
  regions_.emplace(info.id, std::move(region));
  return info;
}

absl::Status RegionTable::Unregister(const Peer& peer, const std::string& id) {
  std::shared_ptr<const Region> released;  // unmapped outside the lock (when its last user ends)
  absl::MutexLock lock(&mu_);
  const auto it = regions_.find(id);
  if (it == regions_.end() || it->second->info.owner.owner() != peer.owner()) return NotFound(id, peer);
  released = std::move(it->second);
  regions_.erase(it);
  Usage& used = usage_[released->info.owner.quota_key()];
  --used.regions;
  used.bytes -= released->info.bytes;
  if (used.regions == 0) usage_.erase(released->info.owner.quota_key());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Region>> RegionTable::Find(const Peer& peer,
                                                                const std::string& id) const {
  absl::MutexLock lock(&mu_);
  const auto it = regions_.find(id);
  if (it == regions_.end() || it->second->info.owner.owner() != peer.owner()) return NotFound(id, peer);
  return it->second;
}

std::vector<RegionInfo> RegionTable::List(const Peer* owner) const {
  std::vector<RegionInfo> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, region] : regions_) {
    if (owner == nullptr || region->info.owner.owner() == owner->owner()) out.push_back(region->info);
  }
  return out;
}

int RegionTable::ReleaseOwner(const std::string& owner) {
  std::vector<std::shared_ptr<const Region>> released;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = regions_.begin(); it != regions_.end();) {
      if (it->second->info.owner.owner() != owner) {
        ++it;
        continue;
      }
      const std::string key = it->second->info.owner.quota_key();
      Usage& used = usage_[key];
      --used.regions;
      used.bytes -= it->second->info.bytes;
      if (used.regions == 0) usage_.erase(key);
      released.push_back(std::move(it->second));
      it = regions_.erase(it);
    }
  }
  return static_cast<int>(released.size());  // unmapped here, outside the lock
}

ResidencyTotals RegionTable::Totals() const {
  ResidencyTotals t;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, region] : regions_) {
    ++t.count;
    t.bytes += region->info.bytes;
    auto& [count, bytes] = t.per_uid[region->info.owner.uid];
    ++count;
    bytes += region->info.bytes;
  }
  return t;
}

}  // namespace arbiter
