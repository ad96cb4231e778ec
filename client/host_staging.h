// A same-node client's bytes-path Matmul taken through host shared memory
// instead of inside the gRPC messages: A and B copied into a sealed memfd that
// this client keeps registered with the daemon (REGION_KIND_HOST_MEMFD, on a
// session of its own), the request naming them and C by offset, C copied out
// once the reply arrives. gRPC's transport moves 3-5 GB/s over a Unix socket
// (bench/results/cpu/wire-tuning.md); the copies, split over a few threads,
// move several times that, and a CUDA daemon copies a host region to its GPU by
// DMA from page-locked memory - so the bytes path costs what the copies cost.
//
// Buffers: one per call in flight, at most kMaxBuffers, each replaced by one
// twice its size when a call needs more; a call that finds every buffer busy
// goes as bytes. The session opens with the first staged call. When the daemon
// no longer knows it (it restarted), the call opens a new session and buffer
// and is retried once. A daemon that takes no host memory of this process (a
// backend that maps none) turns staging off for this client: bytes from then
// on; a buffer its quota refuses sends calls that need as much as bytes.
//
// Owned by ArbiterClient; the daemon releases the buffers' regions when this
// object (its session) goes. Thread-safe: internal synchronization; copies of
// concurrent calls take turns on the copy threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "arbiter/v1/arbiter.pb.h"
#include "base/fork_join_pool.h"

namespace arbiter::client {

class ArbiterClient;
class Session;
class SharedMemory;

class HostStaging {
 public:
  static constexpr int kMaxBuffers = 4;
  // A copy part below this costs more in its thread's wake-up than it saves.
  static constexpr size_t kMinPartBytes = 256 << 10;

  // `client` must outlive this object; `threads` copy A, B and C (at least 1).
  HostStaging(ArbiterClient* client, int threads, int64_t min_bytes);
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // Runs `request` staged, C into `c` (exactly `c_bytes`) or, when `c` is null,
  // into response->c(). nullopt when staging does not apply and the caller sends
  // bytes: a request that names regions, tensors, events or event slots (its own
  // session's), whose A or B is not the size its problem says (the daemon names
  // the mismatch), smaller than min_bytes, every buffer busy, or staging off.
  std::optional<grpc::Status> Matmul(const v1::MatmulRequest& request, void* c, size_t c_bytes,
                                     v1::MatmulResponse* response);

  int64_t staged_calls() const;  // Matmuls that went staged, retries not counted twice

 private:
  struct Buffer;
  // A free buffer of at least `bytes` on the current session, made or grown as
  // needed and marked busy; null when none can be had.
  Buffer* Acquire(size_t bytes);
  void Release(Buffer* buffer);
  // The daemon forgot `buffer`'s session: drop the session and its buffers.
  void Forget(Buffer* buffer);
  // Each of `ranges` copied, the whole split over the copy threads; `streaming`:
  // stores that bypass the caches (memory a DMA reads next).
  struct Range {
    char* to;
    const char* from;
    size_t bytes;
  };
  void Copy(const std::vector<Range>& ranges, bool streaming);

  ArbiterClient* const client_;
  const int64_t min_bytes_;
  const int threads_;

  mutable std::mutex mu_;
  std::shared_ptr<Session> session_;             // guarded by mu_; null until first needed
  std::vector<std::unique_ptr<Buffer>> buffers_;  // guarded by mu_
  bool off_ = false;                              // guarded by mu_
  size_t too_large_ = SIZE_MAX;                   // guarded by mu_: the least the daemon's quota refused
  int64_t staged_ = 0;                            // guarded by mu_

  std::mutex copy_mu_;                 // one call's copy at a time on pool_
  std::unique_ptr<ForkJoinPool> pool_;  // guarded by copy_mu_; made by the first copy
};

}  // namespace arbiter::client
