#include "engine/launch_recordings.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace arbiter {
namespace {

std::string RefusalKey(const LaunchKey& key) {
  return absl::StrCat(std::string(key.candidate), "@", key.version);
}

}  // namespace

LaunchRecordings::LaunchRecordings(LaunchRecorder& recorder, size_t capacity)
    : recorder_(recorder), capacity_(capacity > 0 ? capacity : 1) {}

LaunchRecordings::~LaunchRecordings() { DropAll(); }

void LaunchRecordings::DropAll() {
  for (Kept& k : kept_) recorder_.Destroy(k.recording);
  kept_.clear();
  seen_once_.clear();
}

bool LaunchRecordings::SeenBefore(const LaunchKey& key) {
  for (auto it = seen_once_.begin(); it != seen_once_.end(); ++it) {
    if (it->Is(key)) {
      seen_once_.erase(it);
      return true;
    }
  }
  seen_once_.push_front(Owned::Of(key));
  if (seen_once_.size() > 4 * capacity_) seen_once_.pop_back();
  return false;
}

bool LaunchRecordings::Has(const LaunchKey& key, uint64_t generation) const {
  if (generation != generation_) return false;
  for (const Kept& k : kept_) {
    if (k.key.Is(key)) return true;
  }
  return false;
}

absl::Status LaunchRecordings::Launch(const LaunchKey& key, uint64_t generation,
                                      absl::FunctionRef<absl::Status()> launch) {
  if (generation != generation_) {
    DropAll();
    generation_ = generation;
  }
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (!it->key.Is(key)) continue;
    kept_.splice(kept_.begin(), kept_, it);
    ++counts_.replayed;
    return recorder_.Replay(kept_.front().recording);
  }
  if (!SeenBefore(key) || refused_.contains(RefusalKey(key))) {
    ++counts_.direct;
    return launch();
  }
  absl::StatusOr<void*> recording = recorder_.Record(launch);
  if (!recording.ok()) {
    ++counts_.direct;
    absl::Status launched = launch();
    // A launch that fails as it is failed the recording too: the candidate's
    // error, not the recorder's, and no reason to stop recording it.
    if (launched.ok()) {
      ++counts_.refused;
      refused_.insert(RefusalKey(key));
      spdlog::info("{} on {}: its launches are not recorded (each launches as it is): {}",
                   RefusalKey(key), key.problem.ToString(), recording.status().ToString());
    }
    return launched;
  }
  if (kept_.size() >= capacity_) {
    recorder_.Destroy(kept_.back().recording);
    kept_.pop_back();
  }
  kept_.push_front(Kept{Owned::Of(key), *recording});
  ++counts_.recorded;
  return recorder_.Replay(*recording);
}

}  // namespace arbiter
