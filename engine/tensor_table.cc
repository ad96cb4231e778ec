#include "engine/tensor_table.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace arbiter {
namespace {

absl::Status NotFound(const std::string& handle, const Peer& peer) {
  return absl::NotFoundError(
      absl::StrCat("tensor \"", handle, "\": not among the resident tensors of ", peer.ToString()));
}

}  // namespace

TensorTable::TensorTable(Backend& backend, StreamPool& streams, TensorLimits limits)
    : backend_(backend), streams_(streams), limits_(limits), ids_(std::random_device{}()) {}

absl::StatusOr<std::unique_ptr<TensorTable::Upload>> TensorTable::Begin(const Peer& owner,
                                                                        int64_t bytes,
                                                                        std::string label) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bytes: expected >= 1 in the upload's first message, got ", bytes));
  }
  RETURN_IF_ERROR(CheckLabel(label));
  auto tensor = std::make_shared<Tensor>();
  {
    absl::MutexLock lock(&mu_);
    if (held_bytes_ + bytes > limits_.max_resident_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "resident tensors hold ", held_bytes_, " bytes; ", bytes, " more would pass ",
          "--max-resident-bytes ", limits_.max_resident_bytes,
          " (nothing is evicted: release tensors first)"));
    }
    int64_t& count = per_peer_[owner.quota_key()];
    if (count + 1 > limits_.max_tensors_per_peer) {
      return absl::ResourceExhaustedError(
          absl::StrCat(owner.ToString(), " holds ", count, " resident tensors; the quota is ",
                       limits_.max_tensors_per_peer, " per process (--max-tensors-per-peer)"));
    }
    ++count;
    held_bytes_ += bytes;
    tensor->info.handle = RandomId('t', ids_);
  }
  tensor->info.bytes = bytes;
  tensor->info.label = std::move(label);
  tensor->info.owner = owner;
  absl::StatusOr<std::unique_ptr<Buffer>> memory = backend_.Allocate(static_cast<size_t>(bytes));
  if (!memory.ok()) {
    absl::MutexLock lock(&mu_);
    Unreserve(tensor->info);
    return memory.status();
  }
  tensor->memory = *std::move(memory);
  return std::unique_ptr<Upload>(new Upload(*this, std::move(tensor)));
}

void TensorTable::Unreserve(const TensorInfo& info) {
  held_bytes_ -= info.bytes;
  const std::string key = info.owner.quota_key();
  if (--per_peer_[key] <= 0) per_peer_.erase(key);
}

TensorTable::Upload::~Upload() {
  if (tensor_ == nullptr) return;
  absl::MutexLock lock(&table_.mu_);
  table_.Unreserve(tensor_->info);
}

absl::Status TensorTable::Upload::Append(const void* data, size_t bytes) {
  if (tensor_ == nullptr) return absl::FailedPreconditionError("the upload is already committed");
  if (bytes == 0) return absl::OkStatus();
  if (static_cast<int64_t>(bytes) > tensor_->info.bytes - received_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data: ", received_ + static_cast<int64_t>(bytes), " bytes sent, the upload announced ",
        tensor_->info.bytes));
  }
  ASSIGN_OR_RETURN(StreamPool::Lease stream, table_.streams_.Acquire(/*bounded=*/false));
  BufferView at(static_cast<char*>(tensor_->memory->data()) + received_, bytes);
  RETURN_IF_ERROR(stream->CopyToDevice(at, data, bytes));
  // The chunk is on the device before the next one (or Commit) is accepted.
  RETURN_IF_ERROR(stream->Synchronize());
  received_ += static_cast<int64_t>(bytes);
  return absl::OkStatus();
}

absl::StatusOr<TensorInfo> TensorTable::Upload::Commit() {
  if (tensor_ == nullptr) return absl::FailedPreconditionError("the upload is already committed");
  if (received_ != tensor_->info.bytes) {
    return absl::InvalidArgumentError(absl::StrCat("data: the upload announced ", tensor_->info.bytes,
                                                   " bytes and ended after ", received_));
  }
  tensor_->info.created_unix = absl::ToUnixSeconds(absl::Now());
  TensorInfo info = tensor_->info;
  absl::MutexLock lock(&table_.mu_);
  table_.tensors_.Add(info.handle, std::move(tensor_));
  tensor_ = nullptr;
  return info;
}

absl::Status TensorTable::Release(const Peer& peer, const std::string& handle) {
  std::shared_ptr<const Tensor> released;  // freed outside the lock, once its last user ends
  absl::MutexLock lock(&mu_);
  released = tensors_.Take(peer, handle);
  if (released == nullptr) return NotFound(handle, peer);
  Unreserve(released->info);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Tensor>> TensorTable::Find(const Peer& peer,
                                                                const std::string& handle) const {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<const Tensor> tensor = tensors_.Find(peer, handle);
  if (tensor == nullptr) return NotFound(handle, peer);
  return tensor;
}

std::vector<TensorInfo> TensorTable::List(const Peer* owner) const {
  absl::MutexLock lock(&mu_);
  return tensors_.List(owner);
}

int TensorTable::ReleaseOwner(const std::string& owner) {
  std::vector<std::shared_ptr<const Tensor>> released;
  {
    absl::MutexLock lock(&mu_);
    released = tensors_.TakeOwner(owner);
    for (const auto& tensor : released) Unreserve(tensor->info);
  }
  return static_cast<int>(released.size());
}

ResidencyTotals TensorTable::Totals() const {
  absl::MutexLock lock(&mu_);
  return tensors_.Totals();
}

}  // namespace arbiter
