#include "client/ctl.h"

#include <cmath>
#include <random>

#include <google/protobuf/struct.pb.h>

#include "client/completion_events.h"
#include "client/ctl_format.h"
#include "client/device_operands.h"
#include "client/dtype_codec.h"
#include "client/matmul_check.h"
#include "client/shared_memory.h"

namespace arbiter::client {

template <typename Request>
bool Ctl::ParseSelectRequest(Request* request) {
  if (!ParseProblem(request->mutable_problem())) return false;
  v1::Determinism determinism;
  v1::TuningPolicy tuning;
  if (!ParseSelectOptions(&determinism, &tuning)) return false;
  request->set_required_determinism(determinism);
  request->set_tuning(tuning);
  return true;
}

// What matmul prints: the reply and how its C compared with the local reference.
struct Ctl::MatmulOutcome {
  const v1::Problem& problem;
  const v1::MatmulResponse& response;
  const CheckResult& check;
  std::string budget_source;  // whose accuracy budget C was checked against
  uint64_t seed;
  std::string operands;     // inline or device
  std::string region_kind;  // device: the region's kind ("memfd", "ipc", "vmm")
};

int Ctl::Matmul() {
  v1::MatmulRequest request;
  if (!ParseSelectRequest(&request)) return kExitUsage;
  const v1::Problem& p = request.problem();
  if (ElementBytes(p.dtype()) == 0 || p.m() <= 0 || p.n() <= 0 || p.k() <= 0) {
    // The daemon would refuse it too; don't build operands for it.
    return UsageError("--m, --n and --k must be positive");
  }
  uint64_t seed = 0;
  CheckOptions check_options;
  if (!ParseCheckOptions(&seed, &check_options)) return kExitUsage;
  const std::string operands = args_.Get("operands", "inline");
  if (operands != "inline" && operands != "device") {
    return UsageError("--operands: expected inline or device, got \"" + operands + "\"");
  }
  if (args_.Has("completion") && operands != "device") {
    return UsageError("--completion: only with --operands device (inline C is complete on arrival)");
  }
  const Operands ops = RandomOperands(p, seed);
  v1::MatmulResponse response;
  std::string c, region_kind;
  if (operands == "device") {
    if (int code = DeviceMatmul(&request, ops, &response, &c, &region_kind); code != kExitOk) {
      return code;
    }
  } else {
    request.set_a(ops.a);
    request.set_b(ops.b);
    if (grpc::Status s = client_.Matmul(request, &response); !s.ok()) return RpcError("matmul", s);
    c = std::move(*response.mutable_c());
  }

  std::string budget_source;
  const v1::AccuracyBudget budget = ContractBudget(response.candidate(), p.dtype(), &budget_source);
  const CheckResult check = CheckMatmul(p, ops, c, budget, check_options);
  PrintMatmul({p, response, check, budget_source, seed, operands, region_kind});
  return check.passed() ? kExitOk : kExitMismatch;
}

bool Ctl::ParseCheckOptions(uint64_t* seed, CheckOptions* check_options) {
  std::string error;
  *seed = std::random_device{}();
  if (args_.Has("seed")) {
    const auto s = args_.GetInt("seed", &error);
    if (!s) {
      UsageError(error);
      return false;
    }
    *seed = static_cast<uint64_t>(*s);
  }
  check_options->seed = *seed + 1;
  if (args_.Has("samples")) {
    const auto s = args_.GetInt("samples", &error);
    if (!s) {
      UsageError(error);
      return false;
    }
    check_options->samples = static_cast<int>(*s);
  }
  return true;
}

v1::AccuracyBudget Ctl::ContractBudget(const std::string& candidate, v1::DType dtype,
                                       std::string* source) {
  v1::AccuracyBudget budget = DefaultBudget(dtype);
  *source = "default";
  v1::ListCandidatesResponse candidates;
  if (client_.ListCandidates(&candidates).ok()) {
    for (const v1::CandidateInfo& c : candidates.candidates()) {
      if (c.name() != candidate) continue;
      for (const v1::MemberContract& member : c.members()) {
        if (member.dtype() == dtype) {
          budget = member.accuracy();
          *source = candidate + "'s contract";
        }
      }
    }
  }
  return budget;
}

void Ctl::PrintMatmul(const MatmulOutcome& m) {
  const v1::Problem& p = m.problem;
  const v1::MatmulResponse& response = m.response;
  const CheckResult& check = m.check;
  if (json_) {
    google::protobuf::Struct out;
    AddField(&out, "problem", ProblemText(p));
    AddField(&out, "candidate", response.candidate());
    AddField(&out, "candidate_version", response.candidate_version());
    AddField(&out, "source", SourceName(response.source()));
    AddField(&out, "bucket", response.bucket());
    AddField(&out, "device_seconds", response.device_seconds());
    AddField(&out, "seed", static_cast<double>(m.seed));
    AddField(&out, "operands", m.operands);
    if (!m.region_kind.empty()) AddField(&out, "region_kind", m.region_kind);
    AddField(&out, "completion",
             response.completion() == v1::COMPLETION_EVENT ? "event" : "sync");
    google::protobuf::Struct* c = (*out.mutable_fields())["check"].mutable_struct_value();
    AddBool(c, "passed", check.passed());
    AddField(c, "checked", static_cast<double>(check.checked));
    AddField(c, "failures", static_cast<double>(check.failures));
    AddField(c, "max_abs_error", check.max_abs_error);
    AddField(c, "worst_ratio", std::isfinite(check.worst_ratio) ? check.worst_ratio : -1);
    AddField(c, "budget", m.budget_source);
    if (!check.first_failure.empty()) AddField(c, "first_failure", check.first_failure);
    PrintJson(out);
    return;
  }
  const double flops = 2.0 * p.m() * p.n() * p.k();
  std::string check_text =
      (check.passed() ? "ok: " : "MISMATCH: ") + std::to_string(check.checked) + " elements, " +
      std::to_string(check.failures) + " outside the budget, max |err| " +
      Sci(check.max_abs_error) + ", worst err/tol " + Fixed(check.worst_ratio, 3) + " (" +
      m.budget_source + ")";
  std::vector<std::pair<std::string, std::string>> fields = {
      {"problem", ProblemText(p)},
      {"candidate", response.candidate() + "@v" + std::to_string(response.candidate_version())},
      {"source", SourceName(response.source())},
      {"bucket", response.bucket()},
      {"operands", m.operands == "device" ? "region (" + m.region_kind + ")" : "inline"},
      {"completion", response.completion() == v1::COMPLETION_EVENT
                         ? "event (slot " + std::to_string(response.event_slot()) +
                               "; no device time: the daemon did not wait)"
                         : "sync"},
      {"device time", FormatSeconds(response.device_seconds()) +
                          (response.device_seconds() > 0
                               ? " (" + Fixed(flops / response.device_seconds() / 1e9, 1) +
                                     " GFLOP/s)"
                               : "")},
      {"check", check_text}};
  if (!check.first_failure.empty()) fields.push_back({"first failure", check.first_failure});
  PrintFields(out_, fields);
}


int Ctl::Select() {
  v1::SelectRequest request;
  if (!ParseSelectRequest(&request)) return kExitUsage;
  v1::SelectResponse response;
  if (grpc::Status s = client_.Select(request, &response); !s.ok()) return RpcError("select", s);
  return Reply(response, [&] {
    PrintFields(out_, {{"problem", ProblemText(request.problem())},
                       {"candidate", response.candidate() + "@v" +
                                         std::to_string(response.candidate_version())},
                       {"source", SourceName(response.source())},
                       {"bucket", response.bucket()},
                       {"reason", response.reason()}});
    if (response.has_verdict()) {
      out_ << "\n";
      PrintVerdict(response.verdict());
    }
  });
}


int Ctl::DeviceMatmul(v1::MatmulRequest* request, const Operands& ops,
                      v1::MatmulResponse* response, std::string* c, std::string* region_kind) {
  const v1::Problem& p = request->problem();
  const std::string completion = args_.Get("completion", "sync");
  if (completion != "sync" && completion != "event") {
    return UsageError("--completion: expected sync or event, got \"" + completion + "\"");
  }
  v1::ServerInfoResponse info;
  if (grpc::Status s = client_.ServerInfo(&info); !s.ok()) return RpcError("matmul: info", s);
  if (grpc::Status s = client_.OpenSession(); !s.ok()) return RpcError("matmul: session", s);
  // One region: A, then B, then C, each at an aligned offset.
  const size_t c_bytes = static_cast<size_t>(p.m() * p.n()) * ElementBytes(p.dtype());
  const size_t a_at = 0, b_at = AlignUp(ops.a.size()), c_at = b_at + AlignUp(ops.b.size());
  std::unique_ptr<DeviceOperands> memory;
  if (grpc::Status s = DeviceOperands::Create(info, args_.Get("region-kind", "auto"), c_at + c_bytes,
                                              &memory);
      !s.ok()) {
    return RpcError("matmul: device operands", s);
  }
  *region_kind = memory->kind_name();
  if (grpc::Status s = memory->Write(a_at, ops.a); !s.ok()) return RpcError("matmul: write A", s);
  if (grpc::Status s = memory->Write(b_at, ops.b); !s.ok()) return RpcError("matmul: write B", s);
  v1::Region region;
  if (grpc::Status s = memory->Register(client_, "arbiterctl matmul", &region); !s.ok()) {
    return RpcError("matmul: register region", s);
  }
  for (auto [ref, at] : {std::pair{request->mutable_a_ref(), a_at}, {request->mutable_b_ref(), b_at},
                         {request->mutable_c_ref(), c_at}}) {
    ref->set_region(region.id());
    ref->set_offset(static_cast<int64_t>(at));
  }
  // Poisoned (NaN in every dtype): a C the kernel did not write fails the check.
  if (grpc::Status s = memory->Write(c_at, std::string(c_bytes, '\xff')); !s.ok()) {
    return RpcError("matmul: poison C", s);
  }
  std::unique_ptr<CompletionEvents> events;
  if (completion == "event") {
    if (grpc::Status s = CompletionEvents::Open(client_, info.uuid(), &events); !s.ok()) {
      return RpcError("matmul: completion events", s);
    }
    events->Prepare(request);
  }
  grpc::Status matmul = client_.Matmul(*request, response);
  if (matmul.ok() && events != nullptr) matmul = events->Synchronize(*response);
  grpc::Status read = matmul.ok() ? memory->Read(c_at, c_bytes, c) : grpc::Status::OK;
  client_.UnregisterRegion(region.id());  // the session's end would release it too
  if (!matmul.ok()) return RpcError("matmul", matmul);
  if (!read.ok()) return RpcError("matmul: read C", read);
  return kExitOk;
}

}  // namespace arbiter::client
