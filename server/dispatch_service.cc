#include "server/dispatch_service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "server/convert.h"
#include "server/grpc_call.h"
#include "server/status_util.h"

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

grpc::Status DispatchService::Matmul(grpc::ServerContext* context,
                                     const v1::MatmulRequest* request,
                                     v1::MatmulResponse* response) {
  absl::Status status = DoMatmul(*request, CallContextOf(*context), response);
  if (!status.ok()) spdlog::warn("matmul from {} refused: {}", context->peer(), status.ToString());
  return ToGrpcStatus(status);
}

grpc::Status DispatchService::Select(grpc::ServerContext* context,
                                     const v1::SelectRequest* request,
                                     v1::SelectResponse* response) {
  absl::Status status = DoSelect(*request, CallContextOf(*context), response);
  if (!status.ok()) spdlog::warn("select from {} refused: {}", context->peer(), status.ToString());
  return ToGrpcStatus(status);
}

absl::Status DispatchService::DoMatmul(const v1::MatmulRequest& request, const CallContext& call,
                                       v1::MatmulResponse* response) {
  // Everything is checked before the engine allocates or runs anything.
  ASSIGN_OR_RETURN(const Problem problem,
                   ProblemFromProto(request.problem(), arbiter_.options().limits));
  RETURN_IF_ERROR(CheckOperandBytes("a", problem, request.a().size()));
  RETURN_IF_ERROR(CheckOperandBytes("b", problem, request.b().size()));
  SelectOptions options;
  ASSIGN_OR_RETURN(options.required, DeterminismFromProto(request.required_determinism()));
  ASSIGN_OR_RETURN(options.tuning, TuningFromProto(request.tuning()));
  options.deadline = call.deadline;
  options.cancelled = call.cancelled;
  options.peer = call.peer;

  ASSIGN_OR_RETURN(DispatchResult result,
                   arbiter_.Dispatch(problem, options, request.a().data(), request.a().size(),
                                     request.b().data(), request.b().size()));
  if (result.c.size() != problem.c_bytes()) {
    return absl::InternalError(absl::StrCat("engine returned ", result.c.size(),
                                            " bytes of C for ", problem.ToString(), ", expected ",
                                            problem.c_bytes()));
  }
  response->set_c(result.c.data(), result.c.size());
  response->set_candidate(result.selection.candidate);
  response->set_candidate_version(result.selection.version);
  response->set_source(VerdictSourceToProto(result.selection.source));
  response->set_device_seconds(result.device_seconds);
  response->set_bucket(result.selection.bucket.ToString());
  spdlog::debug("matmul {} ran {}@v{} ({}) in {:.3f} ms on the device", problem.ToString(),
                result.selection.candidate, result.selection.version,
                VerdictSourceName(result.selection.source), result.device_seconds * 1e3);
  return absl::OkStatus();
}

absl::Status DispatchService::DoSelect(const v1::SelectRequest& request, const CallContext& call,
                                       v1::SelectResponse* response) {
  ASSIGN_OR_RETURN(const Problem problem,
                   ProblemFromProto(request.problem(), arbiter_.options().limits));
  SelectOptions options;
  ASSIGN_OR_RETURN(options.required, DeterminismFromProto(request.required_determinism()));
  ASSIGN_OR_RETURN(options.tuning, TuningFromProto(request.tuning()));
  options.deadline = call.deadline;
  options.cancelled = call.cancelled;
  options.peer = call.peer;
  ASSIGN_OR_RETURN(const Selection selection, arbiter_.Select(problem, options));
  ToProto(selection, response);
  spdlog::debug("select {} -> {}@v{} ({}): {}", problem.ToString(), selection.candidate,
                selection.version, VerdictSourceName(selection.source), selection.reason);
  return absl::OkStatus();
}

}  // namespace arbiter::server
