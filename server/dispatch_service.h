// The Dispatch service: clients run matmuls (Matmul), ask which kernel would
// run (Select), and keep operands on the daemon's device - regions of their
// own memory (RegisterRegion, zero-copy, same node) and resident tensors
// (UploadTensor). Every request is validated - dtype, dimensions against the
// engine's limits, operand byte counts, each operand inline or by ref but not
// both, refs against their region or tensor - before any compute or
// allocation, and engine errors reach the client through status_util
// unchanged. A bad request is answered with an error; it never takes the
// daemon down. A Matmul whose gRPC deadline passes before its kernel starts
// (queued behind other work) is not run: DEADLINE_EXCEEDED; a call whose client
// went away leaves every queue at once (its waits poll ServerContext::IsCancelled).
// A Matmul whose reply (C and the response's other fields) could not fit in
// --max-message-bytes is refused before any work: RESOURCE_EXHAUSTED.
//
// On the wire a Matmul is read and written raw (MatmulBytes). Its request is
// not parsed into a message: the small fields are, while A and B stay in the
// slices gRPC received them in and are gathered from there straight to the
// device (wire_matmul_request.h) - no copy into std::strings first. Its reply
// is its small fields serialized, then C's bytes in a gRPC slice the device
// copy writes straight into - no zero-filled std::string, no second copy when
// protobuf serializes it; those buffers are kept and reused once sent, so a
// reply's pages are not faulted in afresh every call. On a GPU they are
// page-locked (Backend::host_allocator): C goes from the device into the reply
// in one DMA, with no staging copy. The bytes either way are exactly a
// MatmulRequest's and MatmulResponse's; clients see no difference.
//
// Select is read and written raw too: a Select whose answer the engine
// remembers (a stored verdict or a force; Arbiter::Remembered) is a lookup -
// no store, no lock that measurement or dispatch hold - and its reply is bytes
// serialized once for that answer and shared by every call it serves.
//
// Callers: a call carrying "arbiter-session" metadata is that session's peer
// (fd_socket.h); regions need one. Without it a TCP caller is its host (the
// connection's address without the port), and a caller over the Unix socket
// must open a session first. Resident tensors of a TCP caller are therefore
// the host's: gRPC tells the daemon nothing when a connection closes, and a
// reconnect comes from a new port, so tensors owned by a connection would be
// stranded, held until the daemon stops. Any connection from that host names,
// lists and releases them; they stay until ReleaseTensor, bounded by the
// per-peer quota (--max-tensors-per-peer, counted per host) and
// --max-resident-bytes.
//
// Does not own the Arbiter, the FdSocket or the Metrics, which must outlive it.
// Thread-safe: the Arbiter, FdSocket and Metrics synchronize themselves; the
// service's own fields are immutable.
#pragma once

#include <chrono>
#include <optional>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/functional/function_ref.h"

#include "arbiter/v1/arbiter.grpc.pb.h"
#include "engine/arbiter.h"

namespace arbiter::server {

class FdSocket;
class Metrics;
class ReplyBuffers;
class SelectReplies;

struct DispatchServiceOptions {
  int64_t max_message_bytes = 0;  // largest reply the server sends; 0: not checked here
  FdSocket* sessions = nullptr;   // the fd socket; null: no sessions (no regions)
  Metrics* metrics = nullptr;     // per-stage dispatch times; null: not recorded
  // Reply buffers for C kept for reuse once sent (reply_buffers.h), at most this many bytes idle.
  int64_t max_idle_reply_bytes = int64_t{512} << 20;
  // Where the reply buffers come from: the backend's (page-locked on a GPU).
  HostAllocator reply_memory;
};

// The most a MatmulResponse takes besides C's bytes: the candidate's name, the
// bucket, the enums, the device time and the framing of every field. Names and
// bucket texts are tens of bytes; the bound leaves an order of magnitude spare.
inline constexpr int64_t kMatmulResponseEnvelopeBytes = 1024;

class DispatchService final : public v1::Dispatch::Service {
 public:
  explicit DispatchService(Arbiter& arbiter, DispatchServiceOptions options = {});
  ~DispatchService() override;
  DispatchService(const DispatchService&) = delete;
  DispatchService& operator=(const DispatchService&) = delete;

  // The typed Matmul (in-process callers); the wire uses MatmulBytes.
  grpc::Status Matmul(grpc::ServerContext* context, const v1::MatmulRequest* request,
                      v1::MatmulResponse* response) override;
  // The wire's Matmul: `request` holds a MatmulRequest's bytes, `reply` gets a
  // MatmulResponse's when the status is OK. Bytes that are no MatmulRequest
  // are refused (INVALID_ARGUMENT) like any bad request, before any work.
  grpc::Status MatmulBytes(grpc::ServerContext* context, const grpc::ByteBuffer& request,
                           grpc::ByteBuffer* reply);
  // The typed Select (in-process callers); the wire uses SelectBytes.
  grpc::Status Select(grpc::ServerContext* context, const v1::SelectRequest* request,
                      v1::SelectResponse* response) override;
  // The wire's Select: `request` holds a SelectRequest's bytes, `reply` gets the
  // SelectResponse's - the same bytes for every call the same remembered
  // Selection answers, serialized once (select_replies.h).
  grpc::Status SelectBytes(grpc::ServerContext* context, grpc::ByteBuffer* request,
                           grpc::ByteBuffer* reply);
  grpc::Status RegisterRegion(grpc::ServerContext* context, const v1::RegisterRegionRequest* request,
                              v1::RegisterRegionResponse* response) override;
  grpc::Status UnregisterRegion(grpc::ServerContext* context,
                                const v1::UnregisterRegionRequest* request,
                                v1::UnregisterRegionResponse* response) override;
  grpc::Status ListRegions(grpc::ServerContext* context, const v1::ListRegionsRequest* request,
                           v1::ListRegionsResponse* response) override;
  grpc::Status UploadTensor(grpc::ServerContext* context,
                            grpc::ServerReader<v1::UploadTensorRequest>* reader,
                            v1::UploadTensorResponse* response) override;
  grpc::Status ReleaseTensor(grpc::ServerContext* context, const v1::ReleaseTensorRequest* request,
                             v1::ReleaseTensorResponse* response) override;
  grpc::Status ListTensors(grpc::ServerContext* context, const v1::ListTensorsRequest* request,
                           v1::ListTensorsResponse* response) override;
  grpc::Status GetCompletionEvents(grpc::ServerContext* context,
                                   const v1::GetCompletionEventsRequest* request,
                                   v1::GetCompletionEventsResponse* response) override;

 private:
  using BytesStream = grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>;
  grpc::Status MatmulOnWire(grpc::ServerContext* context, BytesStream* stream);
  grpc::Status SelectOnWire(grpc::ServerContext* context, BytesStream* stream);
  // Runs the request: its fields but A and B in `request` (whose a and b are
  // ignored), inline A and B in `a` and `b` (their pieces, in order; empty when
  // not sent); `response` gets every field but C. An inline C goes to
  // `c_buffer(bytes)`, asked for once the request has passed every check.
  absl::Status DoMatmul(const grpc::ServerContext& context, const v1::MatmulRequest& request,
                        const std::vector<HostPiece>& a, const std::vector<HostPiece>& b,
                        v1::MatmulResponse* response,
                        absl::FunctionRef<void*(size_t bytes)> c_buffer);
  // The remembered Selection when there is one (a lookup: no CallContext is
  // built, no store read), else the engine's full Select for the call.
  absl::StatusOr<std::shared_ptr<const Selection>> DoSelect(const grpc::ServerContext& context,
                                                            const v1::SelectRequest& request);
  absl::Status DoRegisterRegion(const grpc::ServerContext& context,
                                const v1::RegisterRegionRequest& request,
                                v1::RegisterRegionResponse* response);
  absl::Status DoUploadTensor(const grpc::ServerContext& context,
                              grpc::ServerReader<v1::UploadTensorRequest>* reader,
                              v1::UploadTensorResponse* response);
  // The caller: its session, else (when `need_session` is false) its TCP
  // connection. UNAUTHENTICATED for a token naming no session; FAILED_PRECONDITION
  // saying how to open one when one is needed and missing.
  absl::StatusOr<Peer> Caller(const grpc::ServerContext& context, bool need_session) const;
  // Refuses, logging why, and returns `status` as a gRPC status.
  grpc::Status Reply(const grpc::ServerContext& context, const char* method,
                     const absl::Status& status) const;

  Arbiter& arbiter_;
  const DispatchServiceOptions options_;
  const std::unique_ptr<ReplyBuffers> reply_buffers_;  // C of the wire's replies
  const std::unique_ptr<SelectReplies> select_replies_;  // the wire's Select replies
};

// The engine's deadline for a call whose gRPC deadline is `rpc_deadline`:
// unset for a call without one (gRPC reports that as time_point::max()).
std::optional<std::chrono::system_clock::time_point> WorkDeadline(
    std::chrono::system_clock::time_point rpc_deadline);

// INVALID_ARGUMENT "a: expected 16384 bytes (m*k*size = 64*64*4), got 100", or OK.
// `operand` is "a" (m x k) or "b" (k x n).
absl::Status CheckOperandBytes(std::string_view operand, const Problem& p, size_t got);

// A MatmulResponse on the wire: `fields` (whose c is empty) serialized, then c
// as its own slice. Parses as `fields` with c set to `c`'s bytes.
grpc::ByteBuffer MatmulReplyBytes(const v1::MatmulResponse& fields, const grpc::Slice& c);

// RESOURCE_EXHAUSTED, naming C's bytes, the envelope and the limit, when a
// MatmulResponse carrying `p`'s C could exceed `max_message_bytes`; OK when it
// fits or the limit is 0.
absl::Status CheckReplyFits(const Problem& p, int64_t max_message_bytes);

}  // namespace arbiter::server
