// A fixed set of device streams that workers lease, one stream per dispatch or
// measurement. Dispatches come first: a dispatch waits in a bounded queue (past
// `max_waiters` dispatches already waiting, it is refused with
// RESOURCE_EXHAUSTED instead of queueing without limit) and is served before any
// measurement; a measurement waits while any dispatch waits, and between its
// steps lends its stream to the dispatches queued (Yield). Every wait ends as
// soon as its caller stops waiting (CallContext: deadline or cancellation).
//
// Ownership: owns the streams; a Lease holds one until it is destroyed, and must
// not outlive the pool.
// Thread-safe: provides internal synchronization (one mutex over the free list,
// the lent streams and the waiter counts).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/call_context.h"
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

  // Waits for a free stream. `bounded` (a dispatch): refused (RESOURCE_EXHAUSTED,
  // naming the limit) when none is free and max_waiters dispatches already wait.
  // Unbounded (a measurement): waits while any dispatch waits. Leaves the queue
  // at once with DEADLINE_EXCEEDED or CANCELLED when `caller` stops waiting.
  absl::StatusOr<Lease> Acquire(bool bounded, const CallContext& caller = {});

  // For a measurement between steps (nothing in flight on `lease`'s stream): when
  // dispatches wait, lends them the stream and waits until it is back and none
  // waits, then holds that same stream again. Returns at once when none waits.
  // When `caller` stops waiting meanwhile: its status, and `lease` is left empty
  // (the stream stays with the pool).
  absl::Status Yield(Lease& lease, const CallContext& caller);

  // Dispatches waiting for a stream now.
  size_t waiting() const;
  // Measurements waiting for a stream (in Acquire or Yield) now.
  size_t measurements_waiting() const;

 private:
  void Return(std::unique_ptr<Stream> stream);
  // Index in free_ of a stream a caller of this kind may take; -1 when none.
  int Takeable(bool dispatch) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Lent(const Stream* s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_waiters_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // signalled when a stream is returned or a waiter leaves
  std::vector<std::unique_ptr<Stream>> free_ ABSL_GUARDED_BY(mu_);
  // Streams a yielding measurement lent: only dispatches take them, until it takes its own back.
  std::vector<const Stream*> lent_ ABSL_GUARDED_BY(mu_);
  size_t dispatch_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  size_t measurement_waiters_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace arbiter
