#include "server/reply_buffers.h"

#include <atomic>
#include <iterator>
#include <utility>

namespace arbiter::server {

struct ReplyBuffers::State {
  State(int64_t max_idle, HostAllocator alloc) : max_idle_bytes(max_idle), allocator(std::move(alloc)) {}
  ~State() {
    for (const auto& [capacity, data] : idle) allocator.free(data);
  }
  const int64_t max_idle_bytes;
  const HostAllocator allocator;
  mutable std::mutex mu;
  std::multimap<size_t, void*> idle;  // capacity -> buffer; guarded by mu
  int64_t idle_bytes = 0;             // guarded by mu
};

// What a lent slice carries to its release, which gRPC runs on whichever of its
// threads drops the slice last: `lent` orders the lease's making before its
// release where the ThreadSanitizer build can see it (gRPC's own hand-off is
// inside Debian's uninstrumented libgrpc).
struct ReplyBuffers::Lease {
  std::shared_ptr<State> state;
  void* data;
  size_t capacity;
  std::atomic<bool> lent{false};
};

ReplyBuffers::ReplyBuffers(int64_t max_idle_bytes, HostAllocator allocator)
    : state_(std::make_shared<State>(max_idle_bytes, std::move(allocator))) {}

ReplyBuffers::~ReplyBuffers() = default;

grpc::Slice ReplyBuffers::Take(size_t bytes) {
  void* data = nullptr;
  size_t capacity = bytes;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    // The smallest idle buffer that holds `bytes` and is at most twice as large.
    const auto it = state_->idle.lower_bound(bytes);
    if (it != state_->idle.end() && it->first / 2 <= bytes) {
      capacity = it->first;
      data = it->second;
      state_->idle_bytes -= static_cast<int64_t>(capacity);
      state_->idle.erase(it);
    }
  }
  if (data == nullptr) data = state_->allocator.allocate(capacity);
  if (data == nullptr) return grpc::Slice();
  auto* lease = new Lease{state_, data, capacity};
  lease->lent.store(true, std::memory_order_release);
  return grpc::Slice(data, bytes, &ReplyBuffers::Return, lease);
}

void ReplyBuffers::Return(void* opaque) {
  std::unique_ptr<Lease> lease(static_cast<Lease*>(opaque));
  lease->lent.load(std::memory_order_acquire);
  State& state = *lease->state;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    if (state.idle_bytes + static_cast<int64_t>(lease->capacity) <= state.max_idle_bytes) {
      state.idle.emplace(lease->capacity, lease->data);
      state.idle_bytes += static_cast<int64_t>(lease->capacity);
      return;
    }
  }
  state.allocator.free(lease->data);
}

int ReplyBuffers::idle_buffers() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return static_cast<int>(state_->idle.size());
}

int64_t ReplyBuffers::idle_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->idle_bytes;
}

}  // namespace arbiter::server
