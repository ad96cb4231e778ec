#include "server/admin_service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "server/admin_auth.h"
#include "server/convert.h"
#include "server/grpc_call.h"
#include "server/status_util.h"

namespace arbiter::server {
namespace {

std::string DescribeScope(const InvalidateScope& s) {
  std::string out;
  if (s.candidate) absl::StrAppend(&out, "candidate=", *s.candidate, " ");
  if (s.dtype) absl::StrAppend(&out, "dtype=", std::string(DTypeName(*s.dtype)), " ");
  if (s.bucket) absl::StrAppend(&out, "bucket=", s.bucket->ToString(), " ");
  if (s.all) absl::StrAppend(&out, "all ");
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace

absl::Status AdminService::Authorize(const grpc::ServerContext& context) const {
  if (auth_ == nullptr) return absl::OkStatus();
  absl::Status status = auth_->Check(context.client_metadata());
  if (!status.ok()) {
    spdlog::warn("admin call from {} refused: {}", context.peer(), status.ToString());
  }
  return status;
}

std::string AdminService::Caller(const grpc::ServerContext& context) const {
  return auth_ == nullptr ? context.peer() : absl::StrCat(context.peer(), " (", auth_->identity(), ")");
}

grpc::Status AdminService::ListCandidates(grpc::ServerContext* context,
                                          const v1::ListCandidatesRequest* request,
                                          v1::ListCandidatesResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  for (const CandidateStatus& c : arbiter_.ListCandidates()) {
    ToProto(c, response->add_candidates());
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::ListVerdicts(grpc::ServerContext* context,
                                        const v1::ListVerdictsRequest* request,
                                        v1::ListVerdictsResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  return ToGrpcStatus(DoListVerdicts(*request, response));
}

absl::Status AdminService::DoListVerdicts(const v1::ListVerdictsRequest& request,
                                          v1::ListVerdictsResponse* response) {
  VerdictFilter filter;
  if (request.dtype() != v1::DTYPE_UNSPECIFIED) {
    ASSIGN_OR_RETURN(filter.dtype, DTypeFromProto(request.dtype(), "dtype"));
  }
  if (!request.bucket().empty()) {
    filter.bucket = ParseBucket(request.bucket());
    if (!filter.bucket) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket: cannot parse \"", request.bucket(),
          "\"; expected the form m(32,64]a8.n(32,64]a8.k(32,64]a8, as listed by verdicts"));
    }
  }
  if (!request.candidate().empty()) filter.candidate = request.candidate();
  ASSIGN_OR_RETURN(const std::vector<Verdict> verdicts, arbiter_.ListVerdicts(filter));
  for (const Verdict& v : verdicts) ToProto(v, response->add_verdicts());
  ASSIGN_OR_RETURN(const std::vector<Forces::Entry> forces, arbiter_.ListForces());
  for (const Forces::Entry& e : forces) {
    const arbiter::Force& f = e.force;
    if (filter.dtype && f.dtype != *filter.dtype) continue;
    if (filter.bucket && f.bucket != *filter.bucket) continue;
    if (filter.candidate && f.candidate != *filter.candidate) continue;
    ToProto(f, e.reach, response->add_forces());
  }
  return absl::OkStatus();
}

std::string AdminService::DescribeForce(const Problem& p) const {
  absl::StatusOr<std::vector<Forces::Entry>> forces = arbiter_.ListForces();
  if (!forces.ok()) return absl::StrCat("unknown (", forces.status().ToString(), ")");
  const Bucket bucket = BucketOf(p);
  std::string out;
  for (const Forces::Entry& e : *forces) {
    const arbiter::Force& f = e.force;
    if (f.dtype == p.dtype && f.bucket == bucket) {
      absl::StrAppend(&out, out.empty() ? "" : ", ", ReachName(e.reach), " force to ", f.candidate,
                      " (\"", f.reason, "\")");
    }
  }
  return out.empty() ? "not forced" : out;
}

grpc::Status AdminService::Force(grpc::ServerContext* context, const v1::ForceRequest* request,
                                 v1::ForceResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  return ToGrpcStatus(DoForce(Caller(*context), *request, response));
}

absl::Status AdminService::DoForce(const std::string& peer, const v1::ForceRequest& request,
                                   v1::ForceResponse* response) {
  ASSIGN_OR_RETURN(const Problem problem,
                   ProblemFromProto(request.problem(), arbiter_.options().limits));
  if (request.candidate().empty()) return absl::InvalidArgumentError("candidate: required");
  if (request.reason().empty()) {
    return absl::InvalidArgumentError(
        "reason: required (say why the measured verdict is being overridden)");
  }
  ASSIGN_OR_RETURN(const Reach reach, ReachFromProto(request.reach()));
  const std::string before = DescribeForce(problem);
  absl::Status status = arbiter_.Force(problem, request.candidate(), request.reason(), reach);
  if (!status.ok()) {
    spdlog::warn("admin force ({}) from {}: {} bucket {} to {} refused: {}", ReachName(reach),
                 peer, problem.ToString(), BucketOf(problem).ToString(), request.candidate(),
                 status.ToString());
    return status;
  }
  response->set_bucket(BucketOf(problem).ToString());
  spdlog::info("admin force ({}) from {}: {} bucket {} before: {}; after: {}", ReachName(reach),
               peer, problem.ToString(), response->bucket(), before, DescribeForce(problem));
  return absl::OkStatus();
}

grpc::Status AdminService::Unforce(grpc::ServerContext* context,
                                   const v1::UnforceRequest* request,
                                   v1::UnforceResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  return ToGrpcStatus(DoUnforce(Caller(*context), *request, response));
}

absl::Status AdminService::DoUnforce(const std::string& peer, const v1::UnforceRequest& request,
                                     v1::UnforceResponse* response) {
  ASSIGN_OR_RETURN(const Problem problem,
                   ProblemFromProto(request.problem(), arbiter_.options().limits));
  ASSIGN_OR_RETURN(const Reach reach, ReachFromProto(request.reach()));
  const std::string before = DescribeForce(problem);
  ASSIGN_OR_RETURN(const bool removed, arbiter_.Unforce(problem, reach));
  response->set_removed(removed);
  response->set_bucket(BucketOf(problem).ToString());
  spdlog::info("admin unforce ({}) from {}: {} bucket {} before: {}; after: {}", ReachName(reach),
               peer, problem.ToString(), response->bucket(), before, DescribeForce(problem));
  return absl::OkStatus();
}

grpc::Status AdminService::Invalidate(grpc::ServerContext* context,
                                      const v1::InvalidateRequest* request,
                                      v1::InvalidateResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  return ToGrpcStatus(DoInvalidate(Caller(*context), *request, response));
}

absl::Status AdminService::DoInvalidate(const std::string& peer,
                                        const v1::InvalidateRequest& request,
                                        v1::InvalidateResponse* response) {
  InvalidateScope scope;
  if (!request.candidate().empty()) scope.candidate = request.candidate();
  if (request.dtype() != v1::DTYPE_UNSPECIFIED) {
    ASSIGN_OR_RETURN(scope.dtype, DTypeFromProto(request.dtype(), "dtype"));
  }
  if (request.has_problem()) {
    ASSIGN_OR_RETURN(const Problem problem,
                     ProblemFromProto(request.problem(), arbiter_.options().limits));
    if (scope.dtype && *scope.dtype != problem.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("dtype ", std::string(DTypeName(*scope.dtype)),
                                                     " contradicts problem.dtype ",
                                                     std::string(DTypeName(problem.dtype))));
    }
    scope.dtype = problem.dtype;
    scope.bucket = BucketOf(problem);
  }
  scope.all = request.all();
  if (!scope.all && !scope.candidate && !scope.dtype && !scope.bucket) {
    return absl::InvalidArgumentError(
        "nothing to invalidate: set candidate, dtype or problem, or all to remove every verdict");
  }
  ASSIGN_OR_RETURN(const Reach reach, ReachFromProto(request.reach()));
  absl::StatusOr<int64_t> before = arbiter_.CountVerdicts();
  ASSIGN_OR_RETURN(const int removed, arbiter_.Invalidate(scope, reach));
  response->set_removed(removed);
  absl::StatusOr<int64_t> after = arbiter_.CountVerdicts();
  spdlog::info("admin invalidate ({}) from {}: scope {} removed {}; verdicts before: {}; after: {}",
               ReachName(reach), peer, DescribeScope(scope), removed,
               before.ok() ? std::to_string(*before) : before.status().ToString(),
               after.ok() ? std::to_string(*after) : after.status().ToString());
  return absl::OkStatus();
}

grpc::Status AdminService::Tune(grpc::ServerContext* context, const v1::TuneRequest* request,
                                grpc::ServerWriter<v1::TuneProgress>* writer) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  return ToGrpcStatus(DoTune(*context, *request, *writer));
}

absl::Status AdminService::DoTune(grpc::ServerContext& context, const v1::TuneRequest& request,
                                  grpc::ServerWriter<v1::TuneProgress>& writer) {
  if (request.problems().empty()) return absl::InvalidArgumentError("problems: empty");
  if (request.problems_size() > kMaxTuneProblems) {
    return absl::InvalidArgumentError(absl::StrCat("problems: at most ", kMaxTuneProblems,
                                                   " per call, got ", request.problems_size()));
  }
  // Every problem is checked before the first is measured.
  std::vector<Problem> problems;
  for (int i = 0; i < request.problems_size(); ++i) {
    absl::StatusOr<Problem> p = ProblemFromProto(request.problems(i), arbiter_.options().limits);
    if (!p.ok()) {
      return absl::Status(p.status().code(), absl::StrCat("problems[", i, "]: ", p.status().message()));
    }
    problems.push_back(*p);
  }
  const std::string peer = Caller(context);
  spdlog::info("admin tune from {}: {} problems", peer, problems.size());
  for (size_t i = 0; i < problems.size(); ++i) {
    if (context.IsCancelled()) return absl::CancelledError("tune cancelled by the client");
    v1::TuneProgress progress;
    progress.set_index(static_cast<int>(i));
    progress.set_total(static_cast<int>(problems.size()));
    *progress.mutable_problem() = ProblemToProto(problems[i]);
    absl::StatusOr<Verdict> verdict = arbiter_.Tune(problems[i], CallContextOf(context));
    if (verdict.ok()) {
      ToProto(*verdict, progress.mutable_verdict());
      spdlog::info("admin tune from {}: {} -> {}", peer, problems[i].ToString(),
                   absl::StrCat(verdict->winner, "@v", verdict->winner_version, ": ",
                                verdict->reason));
    } else {
      progress.set_error(verdict.status().ToString());
      spdlog::warn("admin tune from {}: {} failed: {}", peer, problems[i].ToString(),
                   verdict.status().ToString());
    }
    if (!writer.Write(progress)) return absl::CancelledError("tune: the client went away");
  }
  return absl::OkStatus();
}

grpc::Status AdminService::ListQuarantine(grpc::ServerContext* context,
                                          const v1::ListQuarantineRequest* request,
                                          v1::ListQuarantineResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  absl::StatusOr<std::vector<QuarantineEntry>> entries = arbiter_.ListQuarantine();
  if (!entries.ok()) return ToGrpcStatus(entries.status());
  for (const QuarantineEntry& q : *entries) ToProto(q, response->add_entries());
  return grpc::Status::OK;
}

grpc::Status AdminService::ClearQuarantine(grpc::ServerContext* context,
                                           const v1::ClearQuarantineRequest* request,
                                           v1::ClearQuarantineResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  return ToGrpcStatus(DoClearQuarantine(Caller(*context), *request, response));
}

absl::Status AdminService::DoClearQuarantine(const std::string& peer,
                                             const v1::ClearQuarantineRequest& request,
                                             v1::ClearQuarantineResponse* response) {
  ASSIGN_OR_RETURN(const Reach reach, ReachFromProto(request.reach()));
  absl::StatusOr<std::vector<QuarantineEntry>> before = arbiter_.ListQuarantine();
  ASSIGN_OR_RETURN(const int removed, arbiter_.ClearQuarantine(request.candidate(), reach));
  response->set_removed(removed);
  absl::StatusOr<std::vector<QuarantineEntry>> after = arbiter_.ListQuarantine();
  spdlog::info(
      "admin clear-quarantine ({}) from {}: candidate {} removed {}; entries before: {}; after: {}",
      ReachName(reach), peer, request.candidate().empty() ? "*" : request.candidate(), removed,
               before.ok() ? std::to_string(before->size()) : before.status().ToString(),
               after.ok() ? std::to_string(after->size()) : after.status().ToString());
  return absl::OkStatus();
}

grpc::Status AdminService::Quarantine(grpc::ServerContext* context,
                                      const v1::QuarantineRequest* request,
                                      v1::QuarantineResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  return ToGrpcStatus(DoQuarantine(Caller(*context), *request));
}

absl::Status AdminService::DoQuarantine(const std::string& peer,
                                        const v1::QuarantineRequest& request) {
  if (request.candidate().empty()) return absl::InvalidArgumentError("candidate: required");
  if (request.reason().empty()) {
    return absl::InvalidArgumentError("reason: required (the evidence against the candidate)");
  }
  const std::string scope = request.scope().empty() ? "*" : request.scope();
  ASSIGN_OR_RETURN(const QuarantineScope parsed, QuarantineScope::Parse(scope));
  ASSIGN_OR_RETURN(const Reach reach, ReachFromProto(request.reach()));
  absl::StatusOr<std::vector<QuarantineEntry>> before = arbiter_.ListQuarantine();
  absl::Status status = arbiter_.Quarantine(request.candidate(), parsed, request.reason(), reach);
  if (!status.ok()) {
    spdlog::warn("admin quarantine ({}) from {}: {} scope {} refused: {}", ReachName(reach), peer,
                 request.candidate(), scope, status.ToString());
    return status;
  }
  absl::StatusOr<std::vector<QuarantineEntry>> after = arbiter_.ListQuarantine();
  spdlog::info("admin quarantine ({}) from {}: {} scope {} (\"{}\"); entries before: {}; after: {}",
               ReachName(reach), peer, request.candidate(), scope, request.reason(),
               before.ok() ? std::to_string(before->size()) : before.status().ToString(),
               after.ok() ? std::to_string(after->size()) : after.status().ToString());
  return absl::OkStatus();
}

grpc::Status AdminService::ServerInfo(grpc::ServerContext* context,
                                      const v1::ServerInfoRequest* request,
                                      v1::ServerInfoResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  return ToGrpcStatus(DoServerInfo(response));
}

absl::Status AdminService::DoServerInfo(v1::ServerInfoResponse* response) {
  const DeviceInfo& device = arbiter_.device();
  response->set_version(identity_.version);
  response->set_backend(device.backend);
  response->set_device_name(device.name);
  response->set_arch(device.arch);
  response->set_fingerprint(device.Fingerprint());
  for (const auto& [name, version] : device.versions) (*response->mutable_versions())[name] = version;
  response->set_tuning(std::string(TuningPolicyName(arbiter_.options().tuning)));
  response->set_candidates(static_cast<int>(arbiter_.registry().candidates().size()));
  ASSIGN_OR_RETURN(const int64_t verdicts, arbiter_.CountVerdicts());
  response->set_verdicts(static_cast<int>(verdicts));
  response->set_store_path(identity_.store_path);
  response->set_uuid(device.uuid);
  response->set_measurements(arbiter_.measurements());
  for (RegionKind kind : arbiter_.RegionKinds()) response->add_region_kinds(RegionKindToProto(kind));
  response->set_fd_socket(identity_.fd_socket);
  response->set_max_message_bytes(identity_.max_message_bytes);
  return absl::OkStatus();
}

grpc::Status AdminService::ListAllRegions(grpc::ServerContext* context,
                                          const v1::ListRegionsRequest* request,
                                          v1::ListRegionsResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  for (const RegionInfo& r : arbiter_.regions().List(nullptr)) ToProto(r, response->add_regions());
  return grpc::Status::OK;
}

grpc::Status AdminService::ListAllTensors(grpc::ServerContext* context,
                                          const v1::ListTensorsRequest* request,
                                          v1::ListTensorsResponse* response) {
  if (absl::Status denied = Authorize(*context); !denied.ok()) return ToGrpcStatus(denied);
  for (const TensorInfo& t : arbiter_.tensors().List(nullptr)) ToProto(t, response->add_tensors());
  return grpc::Status::OK;
}

}  // namespace arbiter::server
