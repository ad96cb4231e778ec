#include "engine/stream_pool.h"

#include "absl/strings/str_cat.h"

namespace arbiter {

StreamPool::Lease::~Lease() {
  if (stream_) pool_->Return(std::move(stream_));
}

StreamPool::StreamPool(std::vector<std::unique_ptr<Stream>> streams, size_t max_waiters)
    : max_waiters_(max_waiters), free_(std::move(streams)) {}

absl::StatusOr<StreamPool::Lease> StreamPool::Acquire(bool bounded) {
  absl::MutexLock lock(&mu_);
  if (free_.empty() && bounded && waiters_ >= max_waiters_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "work queue full: ", waiters_, " requests already waiting for a device stream (limit ",
        max_waiters_, ")"));
  }
  ++waiters_;
  while (free_.empty()) freed_.Wait(&mu_);
  --waiters_;
  std::unique_ptr<Stream> stream = std::move(free_.back());
  free_.pop_back();
  return Lease(this, std::move(stream));
}

size_t StreamPool::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiters_;
}

void StreamPool::Return(std::unique_ptr<Stream> stream) {
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(stream));
  freed_.Signal();
}

}  // namespace arbiter
