#include "engine/stream_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace arbiter {

StreamPool::Lease::~Lease() {
  if (stream_) pool_->Return(std::move(stream_));
}

StreamPool::StreamPool(std::vector<std::unique_ptr<Stream>> streams, size_t max_waiters)
    : max_waiters_(max_waiters), free_(std::move(streams)) {}

bool StreamPool::Lent(const Stream* s) const {
  return std::find(lent_.begin(), lent_.end(), s) != lent_.end();
}

int StreamPool::Takeable(bool dispatch) const {
  if (!dispatch && dispatch_waiters_ > 0) return -1;  // dispatches first
  for (size_t i = free_.size(); i-- > 0;) {
    if (dispatch || !Lent(free_[i].get())) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<StreamPool::Lease> StreamPool::Acquire(bool bounded, const CallContext& caller) {
  absl::MutexLock lock(&mu_);
  int i = Takeable(bounded);
  if (i < 0) {
    if (bounded && dispatch_waiters_ >= max_waiters_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "work queue full: ", dispatch_waiters_,
          " requests already waiting for a device stream (limit ", max_waiters_, ")"));
    }
    size_t& waiters = bounded ? dispatch_waiters_ : measurement_waiters_;
    ++waiters;
    while ((i = Takeable(bounded)) < 0) {
      if (absl::Status s =
              caller.StillWaiting("while queued for a device stream; the work was not started");
          !s.ok()) {
        --waiters;
        changed_.SignalAll();  // a measurement may go now that this dispatch left
        return s;
      }
      changed_.WaitWithDeadline(&mu_, caller.WakeBy());
    }
    --waiters;
  }
  std::unique_ptr<Stream> stream = std::move(free_[i]);
  free_.erase(free_.begin() + i);
  if (bounded) changed_.SignalAll();  // the last dispatch waiter gone lets a measurement on
  return Lease(this, std::move(stream));
}

absl::Status StreamPool::Yield(Lease& lease, const CallContext& caller) {
  absl::MutexLock lock(&mu_);
  if (dispatch_waiters_ == 0) return absl::OkStatus();
  const Stream* mine = lease.stream_.get();
  lent_.push_back(mine);
  free_.push_back(std::move(lease.stream_));
  changed_.SignalAll();
  ++measurement_waiters_;
  auto back = [&] {
    if (dispatch_waiters_ > 0) return free_.end();
    return std::find_if(free_.begin(), free_.end(),
                        [&](const std::unique_ptr<Stream>& s) { return s.get() == mine; });
  };
  auto it = back();
  absl::Status status;
  while (it == free_.end()) {
    status = caller.StillWaiting("while lending its device stream to dispatches");
    if (!status.ok()) break;
    changed_.WaitWithDeadline(&mu_, caller.WakeBy());
    it = back();
  }
  --measurement_waiters_;
  lent_.erase(std::find(lent_.begin(), lent_.end(), mine));
  if (!status.ok()) {
    changed_.SignalAll();  // the stream is an ordinary free stream again
    return status;
  }
  lease.stream_ = std::move(*it);
  free_.erase(it);
  return absl::OkStatus();
}

size_t StreamPool::waiting() const {
  absl::MutexLock lock(&mu_);
  return dispatch_waiters_;
}

size_t StreamPool::measurements_waiting() const {
  absl::MutexLock lock(&mu_);
  return measurement_waiters_;
}

void StreamPool::Return(std::unique_ptr<Stream> stream) {
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(stream));
  changed_.SignalAll();
}

}  // namespace arbiter
