#include "server/dispatch_service.h"

#include <unistd.h>

#include <algorithm>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/method_handler.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "server/convert.h"
#include "server/fd_socket.h"
#include "server/grpc_call.h"
#include "server/metrics.h"
#include "server/reply_buffers.h"
#include "server/select_replies.h"
#include "server/status_util.h"
#include "server/wire_matmul_request.h"

namespace arbiter::server {

std::optional<std::chrono::system_clock::time_point> WorkDeadline(
    std::chrono::system_clock::time_point rpc_deadline) {
  if (rpc_deadline == std::chrono::system_clock::time_point::max()) return std::nullopt;
  return rpc_deadline;
}

absl::Status CheckOperandBytes(std::string_view operand, const Problem& p, size_t got) {
  const bool is_a = operand == "a";
  const size_t expected = is_a ? p.a_bytes() : p.b_bytes();
  if (got == expected) return absl::OkStatus();
  const int64_t rows = is_a ? p.m : p.k;
  const int64_t cols = is_a ? p.k : p.n;
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(operand), ": expected ", expected, " bytes (", is_a ? "m*k" : "k*n", "*size = ", rows, "*",
      cols, "*", ElementSize(p.dtype), " for ", p.ToString(), "), got ", got));
}

absl::Status CheckReplyFits(const Problem& p, int64_t max_message_bytes) {
  if (max_message_bytes <= 0) return absl::OkStatus();
  const int64_t c_bytes = static_cast<int64_t>(p.c_bytes());
  if (c_bytes + kMatmulResponseEnvelopeBytes <= max_message_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "reply: c is ", c_bytes, " bytes (m*n*size = ", p.m, "*", p.n, "*", ElementSize(p.dtype),
      " for ", p.ToString(), "); with up to ", kMatmulResponseEnvelopeBytes,
      " bytes of response fields it could exceed --max-message-bytes ", max_message_bytes,
      "; name a region for C (c_ref) or raise the limit"));
}

grpc::ByteBuffer MatmulReplyBytes(const v1::MatmulResponse& fields, const grpc::Slice& c) {
  using google::protobuf::internal::WireFormatLite;
  using google::protobuf::io::CodedOutputStream;
  std::string head = fields.SerializeAsString();
  if (c.size() == 0) {  // proto3 leaves an empty bytes field out
    grpc::Slice only(head);
    return grpc::ByteBuffer(&only, 1);
  }
  // Fields may come in any order on the wire: C last, as its tag and length
  // here and its bytes in their own slice.
  uint8_t key[16];
  uint8_t* end = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(v1::MatmulResponse::kCFieldNumber,
                              WireFormatLite::WIRETYPE_LENGTH_DELIMITED),
      key);
  end = CodedOutputStream::WriteVarint64ToArray(c.size(), end);
  head.append(reinterpret_cast<const char*>(key), static_cast<size_t>(end - key));
  const grpc::Slice slices[] = {grpc::Slice(head), c};
  return grpc::ByteBuffer(slices, 2);
}

DispatchService::~DispatchService() = default;

DispatchService::DispatchService(Arbiter& arbiter, DispatchServiceOptions options)
    : arbiter_(arbiter),
      options_(options),
      reply_buffers_(
          std::make_unique<ReplyBuffers>(options.max_idle_reply_bytes, options.reply_memory)),
      select_replies_(std::make_unique<SelectReplies>()) {
  // The wire's Matmul is served as a streamed unary call (one read, one write;
  // the mechanism of the generated WithStreamedUnaryMethod_Matmul) whose
  // request and reply types are ByteBuffers: A and B come in, and C goes out,
  // without being copied into a message.
  const int matmul = v1::MatmulRequest::descriptor()
                         ->file()
                         ->FindServiceByName("Dispatch")
                         ->FindMethodByName("Matmul")
                         ->index();
  MarkMethodStreamed(matmul,
                     new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                         [this](grpc::ServerContext* context, BytesStream* stream) {
                           return MatmulOnWire(context, stream);
                         }));
  // Select the same way, so that its reply can be bytes built once (select_replies.h).
  const int select = v1::SelectRequest::descriptor()
                         ->file()
                         ->FindServiceByName("Dispatch")
                         ->FindMethodByName("Select")
                         ->index();
  MarkMethodStreamed(select,
                     new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                         [this](grpc::ServerContext* context, BytesStream* stream) {
                           return SelectOnWire(context, stream);
                         }));
}

grpc::Status DispatchService::Reply(const grpc::ServerContext& context, const char* method,
                                    const absl::Status& status) const {
  if (!status.ok()) {
    spdlog::warn("{} from {} refused: {}", method, context.peer(), status.ToString());
  }
  return ToGrpcStatus(status);
}

absl::StatusOr<Peer> DispatchService::Caller(const grpc::ServerContext& context,
                                             bool need_session) const {
  const auto& metadata = context.client_metadata();
  if (const auto it = metadata.find(kSessionMetadata); it != metadata.end()) {
    const std::string_view token(it->second.data(), it->second.size());
    if (options_.sessions != nullptr) {
      if (std::optional<Peer> peer = options_.sessions->Find(token)) return *std::move(peer);
    }
    return absl::UnauthenticatedError(absl::StrCat(
        kSessionMetadata, ": no such session (it ended, or the daemon restarted); connect to the fd "
        "socket again for a new one"));
  }
  const std::string address = context.peer();
  const bool over_unix = address.rfind("unix:", 0) == 0;
  if (need_session || over_unix) {
    const std::string how =
        options_.sessions != nullptr
            ? absl::StrCat("connect to the fd socket ", options_.sessions->path(),
                           " and send the token it answers as \"", kSessionMetadata, "\" metadata")
            : std::string("this daemon has no Unix listener (--listen unix:/path), so no sessions");
    return absl::FailedPreconditionError(absl::StrCat(
        need_session ? "regions and completion events belong to a session"
                     : "over a Unix socket, resident tensors belong to a session",
        ": ", how));
  }
  Peer peer;
  peer.address = PeerHost(address);
  return peer;
}

namespace {

// One piece over an inline operand of a typed request; none for an empty one.
std::vector<HostPiece> PiecesOf(const std::string& bytes) {
  if (bytes.empty()) return {};
  return {HostPiece{bytes.data(), bytes.size()}};
}

}  // namespace

grpc::Status DispatchService::Matmul(grpc::ServerContext* context,
                                     const v1::MatmulRequest* request,
                                     v1::MatmulResponse* response) {
  return Reply(*context, "matmul",
               DoMatmul(*context, *request, PiecesOf(request->a()), PiecesOf(request->b()), response,
                        [response](size_t bytes) {
                          std::string* c = response->mutable_c();
                          c->resize(bytes);
                          return static_cast<void*>(c->data());
                        }));
}

grpc::Status DispatchService::MatmulBytes(grpc::ServerContext* context,
                                          const grpc::ByteBuffer& request,
                                          grpc::ByteBuffer* reply) {
  absl::StatusOr<std::unique_ptr<WireMatmulRequest>> parsed = WireMatmulRequest::Parse(request);
  if (!parsed.ok()) return Reply(*context, "matmul", parsed.status());
  const WireMatmulRequest& wire = **parsed;
  v1::MatmulResponse fields;
  grpc::Slice c;
  const absl::Status status =
      DoMatmul(*context, wire.fields(), wire.a(), wire.b(), &fields, [&](size_t bytes) {
        // Not zero-filled: the copy from the device writes every byte.
        c = reply_buffers_->Take(bytes);
        if (c.size() != bytes) c = grpc::Slice(bytes);
        return static_cast<void*>(const_cast<uint8_t*>(c.begin()));
      });
  if (!status.ok()) return Reply(*context, "matmul", status);
  *reply = MatmulReplyBytes(fields, c);
  return grpc::Status::OK;
}

grpc::Status DispatchService::MatmulOnWire(grpc::ServerContext* context, BytesStream* stream) {
  grpc::ByteBuffer request;
  if (!stream->Read(&request)) {
    return Reply(*context, "matmul", absl::InvalidArgumentError("no request arrived"));
  }
  grpc::ByteBuffer reply;
  const grpc::Status status = MatmulBytes(context, request, &reply);
  if (!status.ok()) return status;
  // The last message: sent together with the status.
  stream->Write(reply, grpc::WriteOptions().set_last_message());
  return grpc::Status::OK;
}

grpc::Status DispatchService::Select(grpc::ServerContext* context,
                                     const v1::SelectRequest* request,
                                     v1::SelectResponse* response) {
  absl::StatusOr<std::shared_ptr<const Selection>> selection = DoSelect(*context, *request);
  if (!selection.ok()) return Reply(*context, "select", selection.status());
  ToProto(**selection, response);
  return grpc::Status::OK;
}

grpc::Status DispatchService::SelectBytes(grpc::ServerContext* context, grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* reply) {
  v1::SelectRequest fields;
  if (const grpc::Status read =
          grpc::SerializationTraits<v1::SelectRequest>::Deserialize(request, &fields);
      !read.ok()) {
    return Reply(*context, "select",
                 absl::InvalidArgumentError(absl::StrCat(
                     "the request is not a SelectRequest (its bytes do not parse as one)",
                     read.error_message().empty() ? "" : ": ", read.error_message())));
  }
  absl::StatusOr<std::shared_ptr<const Selection>> selection = DoSelect(*context, fields);
  if (!selection.ok()) return Reply(*context, "select", selection.status());
  grpc::Slice bytes = select_replies_->Of(*selection);
  *reply = grpc::ByteBuffer(&bytes, 1);
  return grpc::Status::OK;
}

grpc::Status DispatchService::SelectOnWire(grpc::ServerContext* context, BytesStream* stream) {
  grpc::ByteBuffer request;
  if (!stream->Read(&request)) {
    return Reply(*context, "select", absl::InvalidArgumentError("no request arrived"));
  }
  grpc::ByteBuffer reply;
  const grpc::Status status = SelectBytes(context, &request, &reply);
  if (!status.ok()) return status;
  // The last message: sent together with the status.
  stream->Write(reply, grpc::WriteOptions().set_last_message());
  return grpc::Status::OK;
}

absl::Status DispatchService::DoMatmul(const grpc::ServerContext& context,
                                       const v1::MatmulRequest& request,
                                       const std::vector<HostPiece>& a,
                                       const std::vector<HostPiece>& b,
                                       v1::MatmulResponse* response,
                                       absl::FunctionRef<void*(size_t bytes)> c_buffer) {
  const auto arrived = std::chrono::steady_clock::now();
  // Everything is checked before the engine allocates or runs anything.
  ASSIGN_OR_RETURN(const Problem problem,
                   ProblemFromProto(request.problem(), arbiter_.options().limits));
  MatmulOperands operands;
  bool regions = false, tensors = false;
  struct Side {
    const char* name;
    const char* ref_name;  // constant: no string built per call
    bool has_ref;
    const v1::OperandRef& ref;
    size_t inline_bytes;
    std::optional<OperandRef>* out;
  };
  const Side sides[] = {
      {"a", "a_ref", request.has_a_ref(), request.a_ref(), TotalBytes(a), &operands.a_ref},
      {"b", "b_ref", request.has_b_ref(), request.b_ref(), TotalBytes(b), &operands.b_ref},
      {"c", "c_ref", request.has_c_ref(), request.c_ref(), 0, &operands.c_ref}};
  for (const Side& side : sides) {
    if (!side.has_ref) continue;
    if (side.inline_bytes != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          side.name, ": both inline bytes and ", side.name, "_ref are set; expected one of them"));
    }
    ASSIGN_OR_RETURN(*side.out, OperandRefFromProto(side.ref, side.ref_name));
    regions |= (*side.out)->target == OperandRef::Target::kRegion;
    tensors |= (*side.out)->target == OperandRef::Target::kTensor;
  }
  if (!operands.a_ref) RETURN_IF_ERROR(CheckOperandBytes("a", problem, TotalBytes(a)));
  if (!operands.b_ref) RETURN_IF_ERROR(CheckOperandBytes("b", problem, TotalBytes(b)));
  if (!operands.c_ref) RETURN_IF_ERROR(CheckReplyFits(problem, options_.max_message_bytes));
  ASSIGN_OR_RETURN(operands.complete_by_event, CompletionFromProto(request.completion()));
  if (operands.complete_by_event && !operands.c_ref) {
    return absl::InvalidArgumentError(
        "completion: COMPLETION_EVENT needs C in a region (c_ref); C sent back in the reply is "
        "complete when the reply arrives");
  }
  operands.done_event_slots.assign(request.done_event_slots().begin(),
                                   request.done_event_slots().end());
  Peer peer;
  // Completion events, like regions, belong to a session.
  if (regions || tensors || !operands.done_event_slots.empty()) {
    ASSIGN_OR_RETURN(peer, Caller(context, regions || !operands.done_event_slots.empty()));
  }
  SelectOptions options;
  ASSIGN_OR_RETURN(options.required, DeterminismFromProto(request.required_determinism()));
  ASSIGN_OR_RETURN(options.tuning, TuningFromProto(request.tuning()));
  CallContext call = CallContextOf(context);
  options.deadline = call.deadline;
  options.cancelled = std::move(call.cancelled);
  options.peer = std::move(call.peer);

  operands.a = a;
  operands.b = b;
  operands.wait_event = request.wait_event();
  // C is copied from the device straight into the reply's own buffer.
  if (!operands.c_ref) operands.c_host = c_buffer(problem.c_bytes());
  ASSIGN_OR_RETURN(const DispatchResult result,
                   arbiter_.Dispatch(problem, options, peer, operands));
  response->set_candidate(result.selection.candidate);
  response->set_candidate_version(result.selection.version);
  response->set_source(VerdictSourceToProto(result.selection.source));
  response->set_device_seconds(result.device_seconds);
  response->set_bucket(result.selection.bucket.ToString());
  response->set_completion(result.by_event ? v1::COMPLETION_EVENT : v1::COMPLETION_SYNC);
  if (result.by_event) response->set_event_slot(static_cast<int32_t>(result.event_slot));
  if (options_.metrics != nullptr) {
    const DispatchStages& s = result.stages;
    const double handler =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count();
    const double device_side =
        s.lease_seconds + s.h2d_seconds + s.launch_seconds + s.kernel_seconds + s.d2h_seconds;
    options_.metrics->ObserveStage(DispatchStage::kPrepare, std::max(0.0, handler - device_side));
    options_.metrics->ObserveStage(DispatchStage::kLease, s.lease_seconds);
    // Operands named by reference cross no bus: no h2d or d2h to record.
    if (s.h2d_seconds > 0) options_.metrics->ObserveStage(DispatchStage::kH2D, s.h2d_seconds);
    options_.metrics->ObserveStage(DispatchStage::kLaunch, s.launch_seconds);
    options_.metrics->ObserveLaunch(s.replayed);
    // Completed by event: the daemon never waited for the kernel.
    if (!result.by_event) options_.metrics->ObserveStage(DispatchStage::kKernel, s.kernel_seconds);
    if (s.d2h_seconds > 0) options_.metrics->ObserveStage(DispatchStage::kD2H, s.d2h_seconds);
  }
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("matmul {} ran {}@v{} ({}) in {:.3f} ms on the device", problem.ToString(),
                  result.selection.candidate, result.selection.version,
                  VerdictSourceName(result.selection.source), result.device_seconds * 1e3);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Selection>> DispatchService::DoSelect(
    const grpc::ServerContext& context, const v1::SelectRequest& request) {
  ASSIGN_OR_RETURN(const Problem problem,
                   ProblemFromProto(request.problem(), arbiter_.options().limits));
  SelectOptions options;
  ASSIGN_OR_RETURN(options.required, DeterminismFromProto(request.required_determinism()));
  ASSIGN_OR_RETURN(options.tuning, TuningFromProto(request.tuning()));
  // The request's tuning plays no part in a remembered answer (selection_cache.h).
  if (std::shared_ptr<const Selection> remembered = arbiter_.Remembered(problem, options.required)) {
    return remembered;
  }
  const CallContext call = CallContextOf(context);
  options.deadline = call.deadline;
  options.cancelled = call.cancelled;
  options.peer = call.peer;
  ASSIGN_OR_RETURN(std::shared_ptr<const Selection> selection,
                   arbiter_.SelectShared(problem, options));
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("select {} -> {}@v{} ({}): {}", problem.ToString(), selection->candidate,
                  selection->version, VerdictSourceName(selection->source), selection->reason);
  }
  return selection;
}

grpc::Status DispatchService::RegisterRegion(grpc::ServerContext* context,
                                             const v1::RegisterRegionRequest* request,
                                             v1::RegisterRegionResponse* response) {
  return Reply(*context, "register-region", DoRegisterRegion(*context, *request, response));
}

absl::Status DispatchService::DoRegisterRegion(const grpc::ServerContext& context,
                                               const v1::RegisterRegionRequest& request,
                                               v1::RegisterRegionResponse* response) {
  ASSIGN_OR_RETURN(const RegionKind kind, RegionKindFromProto(request.kind()));
  const std::vector<RegionKind> here = arbiter_.RegionKinds();
  if (std::find(here.begin(), here.end(), kind) == here.end()) {
    std::string kinds;
    for (RegionKind k : here) absl::StrAppend(&kinds, kinds.empty() ? "" : ", ", v1::RegionKind_Name(RegionKindToProto(k)));
    return absl::UnimplementedError(absl::StrCat(
        "kind: the ", arbiter_.device().backend, " backend does not map ",
        v1::RegionKind_Name(request.kind()), "; it maps ", kinds.empty() ? "none" : kinds));
  }
  ASSIGN_OR_RETURN(const Peer peer, Caller(context, /*need_session=*/true));
  RegionSource source;
  source.kind = kind;
  source.bytes = request.bytes();
  if (source.bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("bytes: expected >= 1, got ", source.bytes));
  }
  struct ClosedAtEnd {
    int fd = -1;
    ~ClosedAtEnd() {
      if (fd >= 0) close(fd);
    }
  } fd;
  if (kind == RegionKind::kCudaIpc) {
    source.ipc_handle = request.cuda_ipc_handle();
  } else {
    ASSIGN_OR_RETURN(fd.fd, options_.sessions->TakeFd(peer, request.fd()));
    source.fd = fd.fd;
  }
  ASSIGN_OR_RETURN(const RegionInfo info, arbiter_.regions().Register(peer, source, request.label()));
  if (!options_.sessions->Alive(peer.session)) {  // it ended while mapping: nobody to own it
    arbiter_.regions().ReleaseOwner(peer.owner());
    return absl::UnavailableError(absl::StrCat(peer.ToString(), " ended during the registration"));
  }
  spdlog::info("{} registered region {} ({}, {} bytes{})", peer.ToString(), info.id,
               RegionKindName(info.kind), info.bytes,
               info.label.empty() ? "" : absl::StrCat(", \"", info.label, "\""));
  ToProto(info, response->mutable_region());
  return absl::OkStatus();
}

grpc::Status DispatchService::UnregisterRegion(grpc::ServerContext* context,
                                               const v1::UnregisterRegionRequest* request,
                                               v1::UnregisterRegionResponse* response) {
  absl::StatusOr<Peer> peer = Caller(*context, /*need_session=*/true);
  if (!peer.ok()) return Reply(*context, "unregister-region", peer.status());
  // Kernels completing by event may still use it: they end, and their slots
  // let go of it, before it is unmapped.
  arbiter_.completions().Settle(*peer);
  return Reply(*context, "unregister-region", arbiter_.regions().Unregister(*peer, request->id()));
}

grpc::Status DispatchService::ListRegions(grpc::ServerContext* context,
                                          const v1::ListRegionsRequest* request,
                                          v1::ListRegionsResponse* response) {
  absl::StatusOr<Peer> peer = Caller(*context, /*need_session=*/true);
  if (!peer.ok()) return Reply(*context, "list-regions", peer.status());
  for (const RegionInfo& r : arbiter_.regions().List(&*peer)) ToProto(r, response->add_regions());
  return grpc::Status::OK;
}

grpc::Status DispatchService::UploadTensor(grpc::ServerContext* context,
                                           grpc::ServerReader<v1::UploadTensorRequest>* reader,
                                           v1::UploadTensorResponse* response) {
  return Reply(*context, "upload-tensor", DoUploadTensor(*context, reader, response));
}

absl::Status DispatchService::DoUploadTensor(const grpc::ServerContext& context,
                                             grpc::ServerReader<v1::UploadTensorRequest>* reader,
                                             v1::UploadTensorResponse* response) {
  ASSIGN_OR_RETURN(const Peer peer, Caller(context, /*need_session=*/false));
  v1::UploadTensorRequest message;
  if (!reader->Read(&message)) {
    return absl::InvalidArgumentError("the upload stream ended before its first message (bytes, label)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<TensorTable::Upload> upload,
                   arbiter_.tensors().Begin(peer, message.bytes(), message.label()));
  do {
    RETURN_IF_ERROR(upload->Append(message.data().data(), message.data().size()));
  } while (reader->Read(&message));
  if (context.IsCancelled()) return absl::CancelledError("the client cancelled the upload");
  ASSIGN_OR_RETURN(const TensorInfo info, upload->Commit());
  if (peer.session != 0 && !options_.sessions->Alive(peer.session)) {
    arbiter_.tensors().ReleaseOwner(peer.owner());
    return absl::UnavailableError(absl::StrCat(peer.ToString(), " ended during the upload"));
  }
  spdlog::info("{} uploaded tensor {} ({} bytes{})", peer.ToString(), info.handle, info.bytes,
               info.label.empty() ? "" : absl::StrCat(", \"", info.label, "\""));
  ToProto(info, response->mutable_tensor());
  return absl::OkStatus();
}

grpc::Status DispatchService::ReleaseTensor(grpc::ServerContext* context,
                                            const v1::ReleaseTensorRequest* request,
                                            v1::ReleaseTensorResponse* response) {
  absl::StatusOr<Peer> peer = Caller(*context, /*need_session=*/false);
  if (!peer.ok()) return Reply(*context, "release-tensor", peer.status());
  return Reply(*context, "release-tensor", arbiter_.tensors().Release(*peer, request->handle()));
}

grpc::Status DispatchService::ListTensors(grpc::ServerContext* context,
                                          const v1::ListTensorsRequest* request,
                                          v1::ListTensorsResponse* response) {
  absl::StatusOr<Peer> peer = Caller(*context, /*need_session=*/false);
  if (!peer.ok()) return Reply(*context, "list-tensors", peer.status());
  for (const TensorInfo& t : arbiter_.tensors().List(&*peer)) ToProto(t, response->add_tensors());
  return grpc::Status::OK;
}

grpc::Status DispatchService::GetCompletionEvents(grpc::ServerContext* context,
                                                  const v1::GetCompletionEventsRequest* request,
                                                  v1::GetCompletionEventsResponse* response) {
  absl::StatusOr<Peer> peer = Caller(*context, /*need_session=*/true);
  if (!peer.ok()) return Reply(*context, "get-completion-events", peer.status());
  absl::StatusOr<std::vector<std::string>> handles = arbiter_.completions().Handles(*peer);
  if (!handles.ok()) return Reply(*context, "get-completion-events", handles.status());
  if (!options_.sessions->Alive(peer->session)) {  // it ended meanwhile: nobody to own them
    arbiter_.completions().ReleaseOwner(peer->owner());
    return Reply(*context, "get-completion-events",
                 absl::UnavailableError(absl::StrCat(peer->ToString(), " ended meanwhile")));
  }
  for (std::string& h : *handles) response->add_cuda_ipc_event_handles(std::move(h));
  return grpc::Status::OK;
}

}  // namespace arbiter::server
