#include "server/select_replies.h"

#include "arbiter/v1/arbiter.pb.h"
#include "server/convert.h"

namespace arbiter::server {
namespace {

// Whether `entry` was built from `selection` itself, not from an earlier object
// that lived at the same address: the same control block.
bool SameObject(const std::weak_ptr<const Selection>& entry,
                const std::shared_ptr<const Selection>& selection) {
  return !entry.owner_before(selection) && !selection.owner_before(entry);
}

}  // namespace

grpc::Slice SelectReplies::Of(const std::shared_ptr<const Selection>& selection) {
  {
    absl::ReaderMutexLock lock(&mu_);
    const auto it = entries_.find(selection.get());
    if (it != entries_.end() && SameObject(it->second.selection, selection)) return it->second.bytes;
  }
  v1::SelectResponse response;
  ToProto(*selection, &response);
  grpc::Slice bytes(response.SerializeAsString());
  if (capacity_ == 0) return bytes;
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= capacity_ && !entries_.contains(selection.get())) {
    absl::erase_if(entries_, [](const auto& e) { return e.second.selection.expired(); });
    if (entries_.size() >= capacity_) entries_.clear();
  }
  entries_.insert_or_assign(selection.get(), Entry{selection, bytes});
  return bytes;
}

size_t SelectReplies::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace arbiter::server
