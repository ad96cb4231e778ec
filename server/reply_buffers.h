// Host buffers for the C of Matmul replies, kept for reuse. A fresh buffer of
// tens of MB comes from mmap and costs a page fault on the first touch of
// every 4 KiB page - as much time as the copy from the device that fills it -
// and is unmapped again when freed. A buffer lent here goes back to the pool
// when gRPC releases the slice it was lent as (the reply sent, or the call
// gone), and the next reply of a size it fits reuses its pages.
//
// The memory comes from the backend's HostAllocator: page-locked on a GPU, so
// the device copies C straight into the reply (no staging, no second copy on
// the host); being slow to get, it is all the more worth keeping.
//
// Bounded: at most `max_idle_bytes` sit idle; a buffer returned past that is
// freed. A buffer is reused for a request of at least half its size, so a
// small reply never holds a large buffer.
//
// Slices may outlive the pool: each holds the pool's state, freed with the
// last of them. Thread-safe: provides internal synchronization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include <grpcpp/support/slice.h>

#include "engine/backend.h"

namespace arbiter::server {

class ReplyBuffers {
 public:
  explicit ReplyBuffers(int64_t max_idle_bytes, HostAllocator allocator = {});
  ~ReplyBuffers();
  ReplyBuffers(const ReplyBuffers&) = delete;
  ReplyBuffers& operator=(const ReplyBuffers&) = delete;

  // A slice of exactly `bytes` (> 0) whose contents are undefined: an idle
  // buffer of the pool when one fits, else a new one. Null slice (size 0) when
  // memory runs out.
  grpc::Slice Take(size_t bytes);

  // Buffers idle now, and their bytes.
  int idle_buffers() const;
  int64_t idle_bytes() const;

 private:
  struct State;
  struct Lease;
  static void Return(void* lease);

  std::shared_ptr<State> state_;
};

}  // namespace arbiter::server
