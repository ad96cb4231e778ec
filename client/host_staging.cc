#include "client/host_staging.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/streaming_copy.h"
#include "client/arbiter_client.h"
#include "client/dtype_codec.h"
#include "client/session.h"
#include "client/shared_memory.h"

namespace arbiter::client {

struct HostStaging::Buffer {
  std::unique_ptr<SharedMemory> memory;
  std::string region;                // its RegisterRegion id
  std::shared_ptr<Session> session;  // the session that owns the region
  bool busy = false;
};

namespace {

// The daemon's answers that say it takes no host memory of this process: no
// memfd regions on its backend, no sessions for it. (RESOURCE_EXHAUSTED, its
// quotas, says only that this much is too much.)
bool RefusesHostMemory(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::PERMISSION_DENIED:
      return true;
    default:
      return false;
  }
}

bool SessionForgotten(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAUTHENTICATED &&
         s.error_message().find("no such session") != std::string::npos;
}

void SetRef(v1::OperandRef* ref, const std::string& region, size_t offset) {
  ref->set_region(region);
  ref->set_offset(static_cast<int64_t>(offset));
}

}  // namespace

HostStaging::HostStaging(ArbiterClient* client, int threads, int64_t min_bytes)
    : client_(client), min_bytes_(min_bytes), threads_(std::max(1, threads)) {}

HostStaging::~HostStaging() = default;

int64_t HostStaging::staged_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return staged_;
}

std::optional<grpc::Status> HostStaging::Matmul(const v1::MatmulRequest& request, void* c,
                                                size_t c_bytes, v1::MatmulResponse* response) {
  // Refs, events and event slots belong to the caller's own session, not staging's.
  if (request.has_a_ref() || request.has_b_ref() || request.has_c_ref() ||
      !request.wait_event().empty() || request.done_event_slots_size() > 0 ||
      (request.completion() != v1::COMPLETION_UNSPECIFIED &&
       request.completion() != v1::COMPLETION_SYNC)) {
    return std::nullopt;
  }
  const v1::Problem& p = request.problem();
  const size_t a_bytes = MatrixBytes(p.dtype(), p.m(), p.k());
  const size_t b_bytes = MatrixBytes(p.dtype(), p.k(), p.n());
  const size_t want_c = MatrixBytes(p.dtype(), p.m(), p.n());
  if (a_bytes == 0 || b_bytes == 0 || want_c == 0 || request.a().size() != a_bytes ||
      request.b().size() != b_bytes || (c != nullptr && c_bytes != want_c)) {
    return std::nullopt;  // the bytes path's refusal names what is wrong
  }
  const size_t a_at = 0, b_at = AlignUp(a_bytes), c_at = b_at + AlignUp(b_bytes);
  const size_t need = c_at + want_c;
  if (static_cast<int64_t>(a_bytes + b_bytes + want_c) < min_bytes_) return std::nullopt;

  grpc::ByteBuffer reply;
  Buffer* buffer = nullptr;
  grpc::Status status;
  for (int attempt = 0; attempt < 2; ++attempt) {
    buffer = Acquire(need);
    if (buffer == nullptr) return std::nullopt;
    char* memory = static_cast<char*>(buffer->memory->data());
    Copy({{memory + a_at, request.a().data(), a_bytes}, {memory + b_at, request.b().data(), b_bytes}},
         /*streaming=*/true);
    v1::MatmulRequest staged;
    *staged.mutable_problem() = p;
    staged.set_required_determinism(request.required_determinism());
    staged.set_tuning(request.tuning());
    SetRef(staged.mutable_a_ref(), buffer->region, a_at);
    SetRef(staged.mutable_b_ref(), buffer->region, b_at);
    SetRef(staged.mutable_c_ref(), buffer->region, c_at);
    status = client_->MatmulCallAs(buffer->session.get(), staged, &reply);
    if (attempt == 0 && SessionForgotten(status)) {
      Forget(buffer);  // the daemon restarted: a new session and buffer, once
      continue;
    }
    break;
  }
  if (status.ok()) status = ParseMatmulReply(reply, response);
  if (status.ok() && !response->c().empty()) {
    status = grpc::Status(grpc::StatusCode::INTERNAL,
                          "the daemon returned C inline for a request that named a region for it");
  }
  if (status.ok()) {
    const char* from = static_cast<const char*>(buffer->memory->data()) + c_at;
    if (c == nullptr) {
      std::string* out = response->mutable_c();
      out->resize(want_c);
      c = out->data();
    }
    Copy({{static_cast<char*>(c), from, want_c}}, /*streaming=*/false);  // the caller reads C next
  }
  Release(buffer);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++staged_;
  }
  return status;
}

HostStaging::Buffer* HostStaging::Acquire(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (off_ || bytes >= too_large_) return nullptr;
  // Buffers of a session the daemon forgot go as they come free.
  std::erase_if(buffers_, [&](const std::unique_ptr<Buffer>& b) {
    return !b->busy && b->session != session_;
  });
  Buffer* smaller = nullptr;
  for (const std::unique_ptr<Buffer>& b : buffers_) {
    if (b->busy) continue;
    if (b->memory->bytes() >= bytes) {
      b->busy = true;
      return b.get();
    }
    smaller = b.get();
  }
  size_t size = bytes;
  if (smaller != nullptr) {  // grown, doubled so that growth is rare
    size = std::max(bytes, 2 * smaller->memory->bytes());
    client_->UnregisterRegionAs(smaller->session.get(), smaller->region);  // the session's end would too
    std::erase_if(buffers_, [&](const std::unique_ptr<Buffer>& b) { return b.get() == smaller; });
  } else if (buffers_.size() >= kMaxBuffers) {
    return nullptr;  // every buffer busy
  }
  if (session_ == nullptr) {
    std::unique_ptr<Session> session;
    const grpc::Status opened = Session::Open(FdSocketPathFor(client_->options().server), &session);
    if (!opened.ok()) {
      off_ = RefusesHostMemory(opened);  // its sessions are full; unreachable: the bytes path says why
      return nullptr;
    }
    session_ = std::move(session);
  }
  auto buffer = std::make_unique<Buffer>();
  if (!SharedMemory::Create(size, "arbiter client staging", &buffer->memory, /*populate=*/true).ok()) {
    return nullptr;
  }
  v1::Region region;
  const grpc::Status registered =
      client_->RegisterFdAs(session_.get(), buffer->memory->fd(), v1::REGION_KIND_HOST_MEMFD,
                            static_cast<int64_t>(size), "arbiter client staging", &region);
  if (!registered.ok()) {
    if (SessionForgotten(registered)) {
      session_.reset();  // the next call opens a new one
    } else if (registered.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      too_large_ = std::min(too_large_, bytes);  // over this process's quota: such calls go as bytes
    } else if (RefusesHostMemory(registered)) {
      off_ = true;
    }
    return nullptr;
  }
  buffer->region = region.id();
  buffer->session = session_;
  buffer->busy = true;
  buffers_.push_back(std::move(buffer));
  return buffers_.back().get();
}

void HostStaging::Release(Buffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  buffer->busy = false;
}

void HostStaging::Forget(Buffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_ == buffer->session) session_.reset();
  std::erase_if(buffers_, [&](const std::unique_ptr<Buffer>& b) { return b.get() == buffer; });
}

void HostStaging::Copy(const std::vector<Range>& ranges, bool streaming) {
  size_t total = 0;
  for (const Range& r : ranges) total += r.bytes;
  std::lock_guard<std::mutex> lock(copy_mu_);
  if (pool_ == nullptr) pool_ = std::make_unique<ForkJoinPool>(threads_);  // threads for staging users only
  const int parts = static_cast<int>(
      std::clamp<size_t>(total / kMinPartBytes, 1, static_cast<size_t>(pool_->threads())));
  // Shares of the ranges' concatenation in whole cache lines, the last taking the rest.
  const size_t share = parts == 1 ? total : (total / static_cast<size_t>(parts)) & ~size_t{63};
  pool_->Run(parts, [&](int part) {
    size_t begin = static_cast<size_t>(part) * share;
    size_t left = part == parts - 1 ? total - begin : share;
    for (const Range& r : ranges) {
      if (left == 0) break;
      if (begin >= r.bytes) {
        begin -= r.bytes;
        continue;
      }
      const size_t take = std::min(left, r.bytes - begin);
      if (streaming) {
        StreamingCopy(r.to + begin, r.from + begin, take);
      } else {
        std::memcpy(r.to + begin, r.from + begin, take);
      }
      left -= take;
      begin = 0;
    }
  });
}

}  // namespace arbiter::client
