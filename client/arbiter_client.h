// A small synchronous client for arbiterd: one channel, the Dispatch and Admin
// stubs, and the grpc.health.v1 Check. Every call carries the bearer token when
// one is configured and the per-call deadline when one is set. Errors come back
// as the daemon sent them (grpc::Status with its code and message).
//
// Same node, over a unix: address, a client may open a session (OpenSession,
// client/session.h): it owns regions - memory shared with the daemon, named by
// byte offsets in Matmuls instead of carrying bytes - and its resident tensors,
// and releases them all when the client is destroyed or its process exits.
//
// Over a unix: address a large bytes-path Matmul is staged by default: A and B
// copied into host shared memory the client keeps registered with the daemon
// and named by offset, C copied back out (ClientOptions::host_staging,
// client/host_staging.h) - the same result, without gRPC's transport.
//
// A Matmul that goes as bytes goes raw: the request's small fields serialized, then A and B sent
// from the request's own strings, not copied into a serialized message; the
// reply's C gathered from the slices it arrived in into response->c(), sized
// once (arbiter/wire/split_fields.h), or with MatmulInto straight into the
// caller's memory. The bytes on the wire are a
// MatmulRequest's and a MatmulResponse's, as protobuf would write them.
//
// Depends only on the wire contract (arbiter_proto) and base/, never on the engine.
// Thread-safe: gRPC stubs and channels may be used from several threads;
// OpenSession must come before the client is shared between threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/impl/codegen/rpc_method.h>

#include "arbiter/v1/arbiter.grpc.pb.h"
#include "client/host_staging.h"
#include "client/session.h"

namespace arbiter::client {

struct ClientOptions {
  std::string server = "127.0.0.1:50051";  // host:port of arbiterd
  std::string token;                       // sent as "authorization: Bearer <token>" when set
  int64_t max_message_bytes = 600ll << 20; // matches arbiterd's default (8192^2 f32 operands)
  double deadline_seconds = 0;             // per call; 0 = no deadline
  // A connection of its own; otherwise gRPC shares one among this process's
  // clients of the same server and settings.
  bool own_connection = false;
  // Same node (a unix: address): a large bytes-path Matmul goes through host
  // shared memory this client keeps registered with the daemon - A and B copied
  // in, C out - instead of inside the gRPC messages (client/host_staging.h).
  // false: every Matmul carries its bytes.
  bool host_staging = true;
  int64_t host_staging_min_bytes = 1 << 20;  // A, B and C together; smaller calls go as bytes
  int host_staging_threads = 0;              // the copies' threads; 0: min(8, the host's cores)
};

// grpc.health.v1.HealthCheckResponse.ServingStatus.
enum class HealthStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };
const char* HealthStatusName(HealthStatus s);

class ArbiterClient {
 public:
  explicit ArbiterClient(const ClientOptions& options);
  ~ArbiterClient();
  ArbiterClient(const ArbiterClient&) = delete;
  ArbiterClient& operator=(const ArbiterClient&) = delete;

  // Dispatch. `request` must not change until Matmul returns (A and B are sent
  // from it, or staged: ClientOptions::host_staging).
  grpc::Status Matmul(const v1::MatmulRequest& request, v1::MatmulResponse* response);
  // Matmul with C written straight into caller memory: `c_bytes` at `c`, exactly
  // the problem's C (m*n*element size). C is copied once, from the slices it
  // arrived in, into `c`; `response` gets every other field (its c stays
  // empty). Saves the caller's copy out of response->c() and the string's
  // pages. INVALID_ARGUMENT before anything is sent when `c_bytes` is not C's
  // size, `c` is null, or the request names a region for C (c_ref); INTERNAL,
  // `c` untouched, when the daemon's C has another size.
  grpc::Status MatmulInto(const v1::MatmulRequest& request, void* c, size_t c_bytes,
                          v1::MatmulResponse* response);
  grpc::Status Select(const v1::SelectRequest& request, v1::SelectResponse* response);
  // Matmuls that went through host staging (ClientOptions::host_staging) so far.
  int64_t staged_calls() const { return staging_ == nullptr ? 0 : staging_->staged_calls(); }

  // Opens a session on the fd socket beside options().server (a unix: address;
  // FAILED_PRECONDITION otherwise); every later call carries its token.
  grpc::Status OpenSession();
  Session* session() const { return session_.get(); }

  // Regions (need a session). RegisterFd passes `fd` over the session and
  // registers `bytes` of it as `kind` (REGION_KIND_HOST_MEMFD or
  // REGION_KIND_CUDA_VMM_FD); the caller may close its own `fd` afterwards.
  grpc::Status RegisterRegion(const v1::RegisterRegionRequest& request, v1::Region* region);
  grpc::Status RegisterFd(int fd, v1::RegionKind kind, int64_t bytes, const std::string& label,
                          v1::Region* region);
  grpc::Status UnregisterRegion(const std::string& id);
  grpc::Status ListRegions(v1::ListRegionsResponse* response);  // this session's
  // The session's completion events (MatmulRequest.completion = EVENT): slot
  // i's cudaIpcEventHandle_t is (*handles)[i]. client/completion_events.h opens them.
  grpc::Status GetCompletionEvents(std::vector<std::string>* handles);

  // Resident tensors: `bytes` of `data` streamed in chunks of kUploadChunkBytes.
  grpc::Status UploadTensor(const void* data, int64_t bytes, const std::string& label,
                            v1::Tensor* tensor);
  grpc::Status ReleaseTensor(const std::string& handle);
  grpc::Status ListTensors(v1::ListTensorsResponse* response);  // this caller's

  // Admin.
  grpc::Status ListCandidates(v1::ListCandidatesResponse* response);
  grpc::Status ListVerdicts(const v1::ListVerdictsRequest& request,
                            v1::ListVerdictsResponse* response);
  grpc::Status Force(const v1::ForceRequest& request, v1::ForceResponse* response);
  grpc::Status Unforce(const v1::UnforceRequest& request, v1::UnforceResponse* response);
  grpc::Status Invalidate(const v1::InvalidateRequest& request, v1::InvalidateResponse* response);
  // Calls `on_progress` for each problem as the daemon finishes it.
  grpc::Status Tune(const v1::TuneRequest& request,
                    const std::function<void(const v1::TuneProgress&)>& on_progress);
  grpc::Status ListQuarantine(v1::ListQuarantineResponse* response);
  grpc::Status ClearQuarantine(const v1::ClearQuarantineRequest& request,
                               v1::ClearQuarantineResponse* response);
  grpc::Status Quarantine(const v1::QuarantineRequest& request);
  grpc::Status ServerInfo(v1::ServerInfoResponse* response);
  grpc::Status ListAllRegions(v1::ListRegionsResponse* response);  // every peer's
  grpc::Status ListAllTensors(v1::ListTensorsResponse* response);

  // grpc.health.v1.Health/Check for `service` ("" = the whole server).
  grpc::Status Health(const std::string& service, HealthStatus* status);
  // Polls Health until it says SERVING; DEADLINE_EXCEEDED (with the last
  // answer) when `timeout_seconds` pass first.
  grpc::Status WaitUntilServing(double timeout_seconds, const std::string& service = "");

  const ClientOptions& options() const { return options_; }

 private:
  friend class HostStaging;  // its calls carry its own session's token

  // Token metadata and deadline; the session's token is `session`'s.
  void Prepare(grpc::ClientContext* context) const { PrepareAs(session_.get(), context); }
  void PrepareAs(const Session* session, grpc::ClientContext* context) const;
  // Sends `request` raw; the reply's bytes in `reply`.
  grpc::Status MatmulCallAs(const Session* session, const v1::MatmulRequest& request,
                            grpc::ByteBuffer* reply);
  grpc::Status RegisterRegionAs(const Session* session, const v1::RegisterRegionRequest& request,
                                v1::Region* region);
  grpc::Status RegisterFdAs(Session* session, int fd, v1::RegionKind kind, int64_t bytes,
                            const std::string& label, v1::Region* region);
  grpc::Status UnregisterRegionAs(const Session* session, const std::string& id);

  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Dispatch::Stub> dispatch_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  const grpc::internal::RpcMethod matmul_;  // Dispatch/Matmul, sent and received raw
  std::unique_ptr<Session> session_;  // set once, by OpenSession
  std::unique_ptr<HostStaging> staging_;  // unix: addresses with host_staging on
};

// Strings lent to gRPC as slices, no copy made: the destructor waits until
// gRPC has released every one (once their bytes are written to the socket, or
// the call that carried them is gone). Thread-safe.
class LentBytes {
 public:
  LentBytes() = default;
  ~LentBytes();
  LentBytes(const LentBytes&) = delete;
  LentBytes& operator=(const LentBytes&) = delete;

  // A slice over `bytes`, which must outlive this object.
  grpc::Slice Lend(const std::string& bytes);

 private:
  static void Release(void* self);

  std::mutex mu_;
  std::condition_variable released_;
  int out_ = 0;  // slices gRPC still holds; guarded by mu_
};

// A MatmulRequest's wire bytes, with A and B lent from the request's own strings.
grpc::ByteBuffer MatmulRequestBytes(const v1::MatmulRequest& request, LentBytes* lent);
// Reads a MatmulResponse's wire bytes, C gathered from the slices once.
// INTERNAL for bytes that are none.
grpc::Status ParseMatmulReply(const grpc::ByteBuffer& reply, v1::MatmulResponse* response);
// The same with C gathered into `c` instead of response->c(): INTERNAL, `c`
// untouched, unless C is exactly `c_bytes`.
grpc::Status ParseMatmulReplyInto(const grpc::ByteBuffer& reply, void* c, size_t c_bytes,
                                  v1::MatmulResponse* response);

// The size of each UploadTensor data message the client sends.
inline constexpr int64_t kUploadChunkBytes = 4 << 20;

}  // namespace arbiter::client
