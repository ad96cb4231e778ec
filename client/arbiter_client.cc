#include "client/arbiter_client.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/impl/codegen/client_unary_call.h>

#include "arbiter/wire/split_fields.h"
#include "arbiter/wire/unix_socket_buffers.h"
#include "client/dtype_codec.h"

namespace arbiter::client {
namespace {

constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

// grpc.health.v1.HealthCheckRequest { string service = 1; }, encoded by hand:
// the health proto is not part of Debian's gRPC headers, and the client depends
// on nothing but the wire contract.
std::string EncodeHealthRequest(const std::string& service) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  if (!service.empty()) {
    coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
        1, google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint32(static_cast<uint32_t>(service.size()));
    coded.WriteString(service);
  }
  coded.Trim();
  return out;
}

// grpc.health.v1.HealthCheckResponse { ServingStatus status = 1; }.
bool DecodeHealthResponse(const std::string& bytes, HealthStatus* status) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  *status = HealthStatus::kUnknown;
  while (uint32_t tag = in.ReadTag()) {
    if (tag == ((1 << 3) | 0)) {  // field 1, varint
      uint32_t value = 0;
      if (!in.ReadVarint32(&value)) return false;
      *status = value <= 3 ? static_cast<HealthStatus>(value) : HealthStatus::kUnknown;
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return true;
}

std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options) {
  grpc::ChannelArguments args;
  const int limit = static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT_MAX));
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  if (options.own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Over a Unix socket, A and B cross in a few wake-ups instead of one per 208 KiB.
  if (options.server.starts_with("unix:")) args.SetSocketMutator(wire::NewUnixSocketBufferMutator(wire::kUnixSocketBufferBytes));
  return grpc::CreateCustomChannel(options.server, grpc::InsecureChannelCredentials(), args);
}

// A length-delimited field's tag and length, as protobuf writes them.
std::string FieldHead(int field, size_t length) {
  using google::protobuf::internal::WireFormatLite;
  using google::protobuf::io::CodedOutputStream;
  uint8_t bytes[16];
  uint8_t* end = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), bytes);
  end = CodedOutputStream::WriteVarint64ToArray(length, end);
  return std::string(reinterpret_cast<const char*>(bytes), static_cast<size_t>(end - bytes));
}

}  // namespace

grpc::ByteBuffer MatmulRequestBytes(const v1::MatmulRequest& request, LentBytes* lent) {
  // Every field but A and B, copied one by one: copying the request whole would
  // copy A and B. (A test fails when MatmulRequest gains a field not copied here.)
  v1::MatmulRequest fields;
  if (request.has_problem()) *fields.mutable_problem() = request.problem();
  fields.set_required_determinism(request.required_determinism());
  fields.set_tuning(request.tuning());
  if (request.has_a_ref()) *fields.mutable_a_ref() = request.a_ref();
  if (request.has_b_ref()) *fields.mutable_b_ref() = request.b_ref();
  if (request.has_c_ref()) *fields.mutable_c_ref() = request.c_ref();
  fields.set_wait_event(request.wait_event());
  fields.set_completion(request.completion());
  *fields.mutable_done_event_slots() = request.done_event_slots();
  fields.GetReflection()->MutableUnknownFields(&fields)->MergeFrom(
      request.GetReflection()->GetUnknownFields(request));
  // Fields may come in any order on the wire: A and B last, each as its tag and
  // length in the slice before it, then its bytes as a slice lent from the request.
  std::string pending = fields.SerializeAsString();
  std::vector<grpc::Slice> slices;
  const std::pair<int, const std::string*> operands[] = {
      {v1::MatmulRequest::kAFieldNumber, &request.a()}, {v1::MatmulRequest::kBFieldNumber, &request.b()}};
  for (const auto& [field, bytes] : operands) {
    if (bytes->empty()) continue;  // proto3 leaves an empty bytes field out
    pending += FieldHead(field, bytes->size());
    slices.emplace_back(pending);
    pending.clear();
    slices.push_back(lent->Lend(*bytes));
  }
  if (!pending.empty() || slices.empty()) slices.emplace_back(pending);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

LentBytes::~LentBytes() {
  std::unique_lock<std::mutex> lock(mu_);
  released_.wait(lock, [this] { return out_ == 0; });
}

grpc::Slice LentBytes::Lend(const std::string& bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++out_;
  }
  return grpc::Slice(const_cast<char*>(bytes.data()), bytes.size(), &LentBytes::Release, this);
}

void LentBytes::Release(void* self) {
  auto* lent = static_cast<LentBytes*>(self);
  std::lock_guard<std::mutex> lock(lent->mu_);
  if (--lent->out_ == 0) lent->released_.notify_all();
}

namespace {

// `reply` split into C's pieces and the response's other fields, parsed.
grpc::Status SplitMatmulReply(const grpc::ByteBuffer& reply, wire::SplitMessage* split,
                              v1::MatmulResponse* response) {
  std::vector<grpc::Slice> slices;
  std::string error;
  if (!reply.Dump(&slices).ok() ||
      !wire::SplitFields(slices, {v1::MatmulResponse::kCFieldNumber}, split, &error) ||
      !response->ParseFromString(split->rest)) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the daemon's reply is not a MatmulResponse" + (error.empty() ? "" : ": " + error));
  }
  return grpc::Status::OK;
}

// C's bytes for `request`'s problem; 0 when its fields cannot say (the daemon refuses those).
size_t CBytesOf(const v1::MatmulRequest& request) {
  const v1::Problem& p = request.problem();
  return MatrixBytes(p.dtype(), p.m(), p.n());
}

}  // namespace

grpc::Status ParseMatmulReply(const grpc::ByteBuffer& reply, v1::MatmulResponse* response) {
  wire::SplitMessage split;
  if (grpc::Status s = SplitMatmulReply(reply, &split, response); !s.ok()) return s;
  // C from the slices it arrived in: one allocation, one copy.
  std::string* c = response->mutable_c();
  c->reserve(wire::TotalBytes(split.fields[0]));
  for (const wire::Piece& piece : split.fields[0]) {
    c->append(reinterpret_cast<const char*>(piece.data), piece.bytes);
  }
  return grpc::Status::OK;
}

grpc::Status ParseMatmulReplyInto(const grpc::ByteBuffer& reply, void* c, size_t c_bytes,
                                  v1::MatmulResponse* response) {
  wire::SplitMessage split;
  if (grpc::Status s = SplitMatmulReply(reply, &split, response); !s.ok()) return s;
  const size_t got = wire::TotalBytes(split.fields[0]);
  if (got != c_bytes) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the daemon's C is " + std::to_string(got) + " bytes; the caller's buffer " +
                            std::to_string(c_bytes));
  }
  char* at = static_cast<char*>(c);
  for (const wire::Piece& piece : split.fields[0]) {
    std::memcpy(at, piece.data, piece.bytes);
    at += piece.bytes;
  }
  return grpc::Status::OK;
}

const char* HealthStatusName(HealthStatus s) {
  switch (s) {
    case HealthStatus::kUnknown:
      return "UNKNOWN";
    case HealthStatus::kServing:
      return "SERVING";
    case HealthStatus::kNotServing:
      return "NOT_SERVING";
    case HealthStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

ArbiterClient::ArbiterClient(const ClientOptions& options)
    : options_(options),
      channel_(MakeChannel(options)),
      dispatch_(v1::Dispatch::NewStub(channel_)),
      admin_(v1::Admin::NewStub(channel_)),
      matmul_("/arbiter.v1.Dispatch/Matmul", grpc::internal::RpcMethod::NORMAL_RPC, channel_) {
  if (options.host_staging && !FdSocketPathFor(options.server).empty()) {
    const int threads = options.host_staging_threads > 0
                            ? options.host_staging_threads
                            : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    staging_ = std::make_unique<HostStaging>(this, threads, options.host_staging_min_bytes);
  }
}

ArbiterClient::~ArbiterClient() = default;

void ArbiterClient::PrepareAs(const Session* session, grpc::ClientContext* context) const {
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
  if (session != nullptr) context->AddMetadata(kSessionMetadata, session->token());
  if (options_.deadline_seconds > 0) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::chrono::duration<double>(options_.deadline_seconds)));
  }
}

grpc::Status ArbiterClient::MatmulCallAs(const Session* session, const v1::MatmulRequest& request,
                                         grpc::ByteBuffer* reply) {
  grpc::ClientContext context;
  PrepareAs(session, &context);
  LentBytes lent;  // its destructor returns once gRPC holds none of A's and B's bytes
  return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel_.get(), matmul_, &context, MatmulRequestBytes(request, &lent), reply);
}

grpc::Status ArbiterClient::Matmul(const v1::MatmulRequest& request, v1::MatmulResponse* response) {
  if (staging_ != nullptr) {
    if (std::optional<grpc::Status> staged = staging_->Matmul(request, nullptr, 0, response)) {
      return *staged;
    }
  }
  grpc::ByteBuffer reply;
  if (grpc::Status s = MatmulCallAs(session_.get(), request, &reply); !s.ok()) return s;
  return ParseMatmulReply(reply, response);
}

grpc::Status ArbiterClient::MatmulInto(const v1::MatmulRequest& request, void* c, size_t c_bytes,
                                       v1::MatmulResponse* response) {
  if (request.has_c_ref()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "MatmulInto: the request names a region for C (c_ref), where the daemon "
                        "writes it; use Matmul");
  }
  if (c == nullptr) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "MatmulInto: c is null");
  }
  const size_t expected = CBytesOf(request);
  if (expected != 0 && expected != c_bytes) {
    const v1::Problem& p = request.problem();
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "MatmulInto: c is " + std::to_string(c_bytes) + " bytes; expected " +
                            std::to_string(expected) + " (m*n*size = " + std::to_string(p.m()) +
                            "*" + std::to_string(p.n()) + "*" +
                            std::to_string(ElementBytes(p.dtype())) + ")");
  }
  if (staging_ != nullptr) {
    if (std::optional<grpc::Status> staged = staging_->Matmul(request, c, c_bytes, response)) {
      return *staged;
    }
  }
  grpc::ByteBuffer reply;
  if (grpc::Status s = MatmulCallAs(session_.get(), request, &reply); !s.ok()) return s;
  return ParseMatmulReplyInto(reply, c, c_bytes, response);
}

grpc::Status ArbiterClient::GetCompletionEvents(std::vector<std::string>* handles) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::GetCompletionEventsResponse response;
  grpc::Status status =
      dispatch_->GetCompletionEvents(&context, v1::GetCompletionEventsRequest(), &response);
  if (!status.ok()) return status;
  handles->assign(response.cuda_ipc_event_handles().begin(), response.cuda_ipc_event_handles().end());
  return grpc::Status::OK;
}

grpc::Status ArbiterClient::Select(const v1::SelectRequest& request, v1::SelectResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return dispatch_->Select(&context, request, response);
}

grpc::Status ArbiterClient::OpenSession() {
  if (session_ != nullptr) return grpc::Status::OK;
  const std::string path = FdSocketPathFor(options_.server);
  if (path.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "sessions (regions) need the daemon's Unix socket: --server unix:/path, got " +
                            options_.server);
  }
  return Session::Open(path, &session_);
}

grpc::Status ArbiterClient::RegisterRegion(const v1::RegisterRegionRequest& request,
                                           v1::Region* region) {
  return RegisterRegionAs(session_.get(), request, region);
}

grpc::Status ArbiterClient::RegisterRegionAs(const Session* session,
                                             const v1::RegisterRegionRequest& request,
                                             v1::Region* region) {
  grpc::ClientContext context;
  PrepareAs(session, &context);
  v1::RegisterRegionResponse response;
  grpc::Status status = dispatch_->RegisterRegion(&context, request, &response);
  if (status.ok() && region != nullptr) *region = response.region();
  return status;
}

grpc::Status ArbiterClient::RegisterFd(int fd, v1::RegionKind kind, int64_t bytes,
                                       const std::string& label, v1::Region* region) {
  if (session_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "RegisterFd: open a session first (OpenSession)");
  }
  return RegisterFdAs(session_.get(), fd, kind, bytes, label, region);
}

grpc::Status ArbiterClient::RegisterFdAs(Session* session, int fd, v1::RegionKind kind,
                                         int64_t bytes, const std::string& label,
                                         v1::Region* region) {
  v1::RegisterRegionRequest request;
  int64_t number = 0;
  if (grpc::Status s = session->PassFd(fd, &number); !s.ok()) return s;
  request.set_kind(kind);
  request.set_bytes(bytes);
  request.set_fd(number);
  request.set_label(label);
  return RegisterRegionAs(session, request, region);
}

grpc::Status ArbiterClient::UnregisterRegion(const std::string& id) {
  return UnregisterRegionAs(session_.get(), id);
}

grpc::Status ArbiterClient::UnregisterRegionAs(const Session* session, const std::string& id) {
  grpc::ClientContext context;
  PrepareAs(session, &context);
  v1::UnregisterRegionRequest request;
  request.set_id(id);
  v1::UnregisterRegionResponse response;
  return dispatch_->UnregisterRegion(&context, request, &response);
}

grpc::Status ArbiterClient::ListRegions(v1::ListRegionsResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return dispatch_->ListRegions(&context, v1::ListRegionsRequest(), response);
}

grpc::Status ArbiterClient::UploadTensor(const void* data, int64_t bytes, const std::string& label,
                                         v1::Tensor* tensor) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::UploadTensorResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::UploadTensorRequest>> writer =
      dispatch_->UploadTensor(&context, &response);
  const char* at = static_cast<const char*>(data);
  int64_t sent = 0;
  v1::UploadTensorRequest message;
  message.set_bytes(bytes);
  message.set_label(label);
  do {
    const int64_t chunk = std::min<int64_t>(kUploadChunkBytes, bytes - sent);
    message.set_data(at + sent, static_cast<size_t>(chunk));
    if (!writer->Write(message)) break;  // the daemon ended the call: Finish says why
    sent += chunk;
    message.Clear();
  } while (sent < bytes);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (status.ok() && tensor != nullptr) *tensor = response.tensor();
  return status;
}

grpc::Status ArbiterClient::ReleaseTensor(const std::string& handle) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::ReleaseTensorRequest request;
  request.set_handle(handle);
  v1::ReleaseTensorResponse response;
  return dispatch_->ReleaseTensor(&context, request, &response);
}

grpc::Status ArbiterClient::ListTensors(v1::ListTensorsResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return dispatch_->ListTensors(&context, v1::ListTensorsRequest(), response);
}

grpc::Status ArbiterClient::ListAllRegions(v1::ListRegionsResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->ListAllRegions(&context, v1::ListRegionsRequest(), response);
}

grpc::Status ArbiterClient::ListAllTensors(v1::ListTensorsResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->ListAllTensors(&context, v1::ListTensorsRequest(), response);
}

grpc::Status ArbiterClient::ListCandidates(v1::ListCandidatesResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->ListCandidates(&context, v1::ListCandidatesRequest(), response);
}

grpc::Status ArbiterClient::ListVerdicts(const v1::ListVerdictsRequest& request,
                                         v1::ListVerdictsResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->ListVerdicts(&context, request, response);
}

grpc::Status ArbiterClient::Force(const v1::ForceRequest& request, v1::ForceResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->Force(&context, request, response);
}

grpc::Status ArbiterClient::Unforce(const v1::UnforceRequest& request,
                                    v1::UnforceResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->Unforce(&context, request, response);
}

grpc::Status ArbiterClient::Invalidate(const v1::InvalidateRequest& request,
                                       v1::InvalidateResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->Invalidate(&context, request, response);
}

grpc::Status ArbiterClient::Tune(const v1::TuneRequest& request,
                                 const std::function<void(const v1::TuneProgress&)>& on_progress) {
  grpc::ClientContext context;
  Prepare(&context);
  std::unique_ptr<grpc::ClientReader<v1::TuneProgress>> reader = admin_->Tune(&context, request);
  v1::TuneProgress progress;
  while (reader->Read(&progress)) on_progress(progress);
  return reader->Finish();
}

grpc::Status ArbiterClient::ListQuarantine(v1::ListQuarantineResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->ListQuarantine(&context, v1::ListQuarantineRequest(), response);
}

grpc::Status ArbiterClient::ClearQuarantine(const v1::ClearQuarantineRequest& request,
                                            v1::ClearQuarantineResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->ClearQuarantine(&context, request, response);
}

grpc::Status ArbiterClient::Quarantine(const v1::QuarantineRequest& request) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::QuarantineResponse response;
  return admin_->Quarantine(&context, request, &response);
}

grpc::Status ArbiterClient::ServerInfo(v1::ServerInfoResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return admin_->ServerInfo(&context, v1::ServerInfoRequest(), response);
}

grpc::Status ArbiterClient::Health(const std::string& service, HealthStatus* status) {
  grpc::ClientContext context;
  Prepare(&context);
  // A health check never waits long, whatever the per-call default.
  if (options_.deadline_seconds <= 0) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  grpc::Slice request_slice(EncodeHealthRequest(service));
  grpc::ByteBuffer request(&request_slice, 1);
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, kHealthCheckMethod, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status rpc_status;
  call->Finish(&response, &rpc_status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!rpc_status.ok()) return rpc_status;
  std::vector<grpc::Slice> slices;
  response.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (!DecodeHealthResponse(bytes, status)) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "malformed grpc.health.v1 response");
  }
  return grpc::Status::OK;
}

grpc::Status ArbiterClient::WaitUntilServing(double timeout_seconds, const std::string& service) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds));
  grpc::Status last;
  HealthStatus status = HealthStatus::kUnknown;
  while (true) {
    last = Health(service, &status);
    if (last.ok() && status == HealthStatus::kServing) return grpc::Status::OK;
    if (std::chrono::steady_clock::now() >= deadline) break;
    // Polling a condition (the daemon's own answer), not sleeping instead of it.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      std::string("not SERVING after ") + std::to_string(timeout_seconds) +
                          " s; last answer: " +
                          (last.ok() ? HealthStatusName(status) : last.error_message()));
}

}  // namespace arbiter::client
