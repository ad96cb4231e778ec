#include "engine/forces.h"

#include "spdlog/spdlog.h"

namespace arbiter {

absl::StatusOr<std::unique_ptr<Forces>> Forces::Create(VerdictStore& store,
                                                       std::string fingerprint) {
  std::unique_ptr<Forces> forces(new Forces(store, std::move(fingerprint)));
  RETURN_IF_ERROR(forces->Reload());
  return forces;
}

absl::Status Forces::Reload() {
  // Cleared first: a change reported while this read runs makes the next Get read again.
  stale_ = false;
  absl::StatusOr<std::vector<Force>> stored = store_.ListForces(fingerprint_);
  if (!stored.ok()) {
    stale_ = true;
    return stored.status();
  }
  std::map<BucketKey, Force> fleet;
  for (Force& f : *stored) fleet[BucketKey{f.dtype, f.bucket}] = std::move(f);
  absl::MutexLock lock(&mu_);
  fleet_ = std::move(fleet);
  return absl::OkStatus();
}

std::optional<Force> Forces::Get(const BucketKey& key) {
  if (stale_) {
    if (absl::Status reloaded = Reload(); !reloaded.ok()) {
      spdlog::debug("forces: serving the last read ({})", reloaded.ToString());
    }
  }
  absl::MutexLock lock(&mu_);
  if (auto it = node_.find(key); it != node_.end()) return it->second;
  if (auto it = fleet_.find(key); it != fleet_.end()) return it->second;
  return std::nullopt;
}

absl::Status Forces::Put(const Force& force, Reach reach) {
  const BucketKey key{force.dtype, force.bucket};
  if (reach == Reach::kFleet) RETURN_IF_ERROR(store_.PutForce(force));
  absl::MutexLock lock(&mu_);
  (reach == Reach::kFleet ? fleet_ : node_)[key] = force;
  return absl::OkStatus();
}

absl::StatusOr<bool> Forces::Remove(const BucketKey& key, Reach reach) {
  if (reach == Reach::kNode) {
    absl::MutexLock lock(&mu_);
    return node_.erase(key) > 0;
  }
  ASSIGN_OR_RETURN(const bool removed, store_.RemoveForce(fingerprint_, key.dtype, key.bucket));
  absl::MutexLock lock(&mu_);
  fleet_.erase(key);
  return removed;
}

absl::StatusOr<std::vector<Forces::Entry>> Forces::List() {
  RETURN_IF_ERROR(Reload());  // an operator asking sees the store as it is
  std::vector<Entry> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, f] : node_) out.push_back(Entry{f, Reach::kNode});
  for (const auto& [key, f] : fleet_) out.push_back(Entry{f, Reach::kFleet});
  return out;
}

}  // namespace arbiter
