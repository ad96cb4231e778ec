// A fixed set of device streams that workers lease, one stream per dispatch or
// measurement. Dispatches wait for a free stream in a bounded queue: past
// `max_waiters` callers already waiting, a bounded Acquire is refused with
// RESOURCE_EXHAUSTED instead of queueing without limit. Measurements acquire
// unbounded (they are already one per bucket).
//
// Ownership: owns the streams; a Lease holds one until it is destroyed, and must
// not outlive the pool.
// Thread-safe: provides internal synchronization (one mutex over the free list
// and the waiter count).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter {

class StreamPool {
 public:
  // One leased stream; returned to the pool when the lease is destroyed.
  class Lease {
   public:
    Lease(Lease&& other) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    Stream& operator*() const { return *stream_; }
    Stream* operator->() const { return stream_.get(); }
    Stream* get() const { return stream_.get(); }

   private:
    friend class StreamPool;
    Lease(StreamPool* pool, std::unique_ptr<Stream> stream)
        : pool_(pool), stream_(std::move(stream)) {}
    StreamPool* pool_;
    std::unique_ptr<Stream> stream_;
  };

  StreamPool(std::vector<std::unique_ptr<Stream>> streams, size_t max_waiters);
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  // Waits for a free stream. `bounded`: refused (RESOURCE_EXHAUSTED, naming the
  // limit) when none is free and max_waiters callers already wait.
  absl::StatusOr<Lease> Acquire(bool bounded);

  // Callers waiting for a stream now.
  size_t waiting() const;

 private:
  void Return(std::unique_ptr<Stream> stream);

  const size_t max_waiters_;
  mutable absl::Mutex mu_;
  absl::CondVar freed_;  // signalled when a stream is returned
  std::vector<std::unique_ptr<Stream>> free_ ABSL_GUARDED_BY(mu_);
  size_t waiters_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace arbiter
