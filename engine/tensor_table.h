// Resident tensors: operands uploaded once (UploadTensor) and kept in device
// memory, named by handle in later Matmuls. Each belongs to the peer that
// uploaded it (another peer naming it is told NOT_FOUND) and is released by
// its owner, when the owner's session ends (ReleaseOwner) or with the table.
//
// Limits: the bytes held by all tensors never pass `max_resident_bytes`, and
// per Peer::quota_key() at most `max_tensors_per_peer` tensors; an upload past
// either is refused with RESOURCE_EXHAUSTED before its memory is allocated.
// Nothing is ever evicted to make room.
//
// An upload reserves its bytes and allocates the device memory at Begin,
// copies each chunk as it arrives (Upload::Append), and becomes a tensor only
// at Commit, once every byte is there and on the device; an upload dropped
// before then frees its memory and its reservation.
//
// Ownership: owns the tensors; borrows the backend and the stream pool, whose
// streams the copies lease.
// Thread-safe: provides internal synchronization (one mutex over the table).
// An Upload is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/owned_map.h"
#include "engine/peer.h"
#include "engine/status.h"
#include "engine/stream_pool.h"

namespace arbiter {

struct TensorLimits {
  int64_t max_resident_bytes = 0;      // all tensors together; 0: resident tensors are off
  int64_t max_tensors_per_peer = 1024;
};

struct TensorInfo {
  std::string handle;  // "t" and 16 hex digits, never reused by this daemon
  int64_t bytes = 0;
  std::string label;
  Peer owner;
  int64_t created_unix = 0;
};

struct Tensor {
  TensorInfo info;
  std::unique_ptr<Buffer> memory;
};

class TensorTable {
 public:
  class Upload {
   public:
    ~Upload();  // an upload never committed gives its memory and reservation back
    Upload(const Upload&) = delete;
    Upload& operator=(const Upload&) = delete;
    // Copies the next `bytes` of the tensor to the device. INVALID_ARGUMENT past
    // the size announced at Begin.
    absl::Status Append(const void* data, size_t bytes);
    // INVALID_ARGUMENT unless exactly the announced bytes arrived; else the tensor.
    absl::StatusOr<TensorInfo> Commit();
    int64_t received() const { return received_; }

   private:
    friend class TensorTable;
    Upload(TensorTable& table, std::shared_ptr<Tensor> tensor)
        : table_(table), tensor_(std::move(tensor)) {}
    TensorTable& table_;
    std::shared_ptr<Tensor> tensor_;  // null once committed
    int64_t received_ = 0;
  };

  TensorTable(Backend& backend, StreamPool& streams, TensorLimits limits);
  TensorTable(const TensorTable&) = delete;
  TensorTable& operator=(const TensorTable&) = delete;

  // Reserves `bytes` against the limits and allocates them on the device.
  absl::StatusOr<std::unique_ptr<Upload>> Begin(const Peer& owner, int64_t bytes, std::string label);
  // NOT_FOUND unless `peer` owns tensor `handle`.
  absl::Status Release(const Peer& peer, const std::string& handle);
  absl::StatusOr<std::shared_ptr<const Tensor>> Find(const Peer& peer, const std::string& handle) const;
  // Every tensor when `owner` is null, else that owner's.
  std::vector<TensorInfo> List(const Peer* owner) const;
  // Releases every tensor of Peer::owner() `owner`; returns how many.
  int ReleaseOwner(const std::string& owner);
  ResidencyTotals Totals() const;
  const TensorLimits& limits() const { return limits_; }

 private:
  void Unreserve(const TensorInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Backend& backend_;
  StreamPool& streams_;
  const TensorLimits limits_;
  mutable absl::Mutex mu_;
  OwnedMap<Tensor> tensors_ ABSL_GUARDED_BY(mu_);
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;           // tensors and uploads in progress
  std::map<std::string, int64_t> per_peer_ ABSL_GUARDED_BY(mu_);  // quota key -> tensors and uploads
  std::mt19937_64 ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace arbiter
