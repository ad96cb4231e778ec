#include "client/ctl.h"

#include <map>

#include <google/protobuf/struct.pb.h>

#include "client/ctl_format.h"
#include "client/dtype_codec.h"
#include "client/table.h"

namespace arbiter::client {

void Ctl::PrintVerdict(const v1::Verdict& v) {
  out_ << DTypeShortName(v.dtype()) << " " << v.bucket() << "  winner " << v.winner() << "@v"
       << v.winner_version() << "  " << SourceName(v.source()) << "  measured at "
       << ProblemText(v.measured()) << "\n";
  if (!v.scope().empty()) {
    const bool shape = v.scope().find('x') != std::string::npos;
    out_ << "  serves " << v.scope()
         << (shape ? " only (a refinement inside the bucket)" : " of the split bucket") << "\n";
  }
  out_ << "  reason: " << v.reason() << "\n";
  if (v.has_transfer() && v.transfer().regret() > 0) {
    const v1::Transfer& t = v.transfer();
    out_ << "  transfer: the bucket's winner " << t.bucket_winner() << " "
         << FormatSeconds(t.bucket_winner_seconds()) << " here, the best " << t.best() << " "
         << FormatSeconds(t.best_seconds()) << ": regret " << Fixed(t.regret(), 3) << "\n";
  }
  Table table({"candidate", "version", "tier", "determinism", "state", "median", "spread",
               "samples", "max_rel_err", "reason"});
  for (const v1::CandidateResult& r : v.results()) {
    const bool timed = r.state() == "timed";
    table.AddRow({r.name(), std::to_string(r.version()), std::to_string(r.tier()),
                  DeterminismShort(r.determinism()), r.state(),
                  timed ? FormatSeconds(r.median_seconds()) : "-",
                  timed ? Fixed(100 * r.spread(), 1) + "%" : "-", std::to_string(r.samples()),
                  r.max_rel_error() > 0 ? Sci(r.max_rel_error()) : "-", r.reason()});
  }
  table.Print(out_, 2);
}


int Ctl::Candidates() {
  v1::ListCandidatesResponse response;
  if (grpc::Status s = client_.ListCandidates(&response); !s.ok()) {
    return RpcError("candidates", s);
  }
  return Reply(response, [&] {
    Table table({"name", "version", "tier", "dtypes", "determinism", "arch", "eligible", "note"});
    for (const v1::CandidateInfo& c : response.candidates()) {
      std::string dtypes, determinism, arch;
      for (const v1::MemberContract& m : c.members()) {
        dtypes += (dtypes.empty() ? "" : ",") + DTypeShortName(m.dtype());
        determinism = DeterminismShort(m.determinism());
        arch = m.arch();
      }
      std::string note = c.ineligible_reason();
      for (const v1::QuarantineEntry& q : c.quarantine()) {
        note += (note.empty() ? "" : "; ") + std::string("quarantined ") + q.scope() + ": " +
                q.reason();
      }
      table.AddRow({c.name(), std::to_string(c.version()), std::to_string(c.tier()), dtypes,
                    determinism, arch, c.eligible() ? "yes" : "no", note});
    }
    table.Print(out_);
  });
}

int Ctl::Verdicts() {
  v1::ListVerdictsRequest request;
  if (args_.Has("dtype")) {
    const auto dtype = ParseDTypeName(args_.Get("dtype"));
    if (!dtype) return UsageError("--dtype: expected f32, f64, f16 or bf16");
    request.set_dtype(*dtype);
  }
  request.set_bucket(args_.Get("bucket"));
  request.set_candidate(args_.Get("candidate"));
  v1::ListVerdictsResponse response;
  if (grpc::Status s = client_.ListVerdicts(request, &response); !s.ok()) {
    return RpcError("verdicts", s);
  }
  return Reply(response, [&] {
    if (response.verdicts().empty()) out_ << "no verdicts\n";
    for (int i = 0; i < response.verdicts_size(); ++i) {
      if (i > 0) out_ << "\n";
      PrintVerdict(response.verdicts(i));
    }
    if (!response.forces().empty()) {
      out_ << "\nforces\n";
      Table table({"dtype", "bucket", "shape", "candidate", "reach", "reason"});
      for (const v1::Force& f : response.forces()) {
        table.AddRow({DTypeShortName(f.dtype()), f.bucket(), f.scope().empty() ? "*" : f.scope(),
                      f.candidate(), f.reach() == v1::REACH_NODE ? "node" : "fleet", f.reason()});
      }
      table.Print(out_);
    }
  });
}

bool Ctl::ParseReach(bool scope_is_reach, v1::Reach* reach) {
  const std::string key = scope_is_reach && args_.Has("scope") ? "scope" : "reach";
  const std::string text = args_.Get(key, "fleet");
  if (text == "fleet") {
    *reach = v1::REACH_FLEET;
  } else if (text == "node") {
    *reach = v1::REACH_NODE;
  } else {
    UsageError("--" + key + ": expected fleet or node, got \"" + text + "\"");
    return false;
  }
  return true;
}

int Ctl::Force() {
  v1::ForceRequest request;
  if (!ParseProblem(request.mutable_problem())) return kExitUsage;
  v1::Reach reach;
  if (!ParseReach(true, &reach)) return kExitUsage;
  request.set_reach(reach);
  if (!args_.Has("candidate") || !args_.Has("reason")) {
    return UsageError("force needs --candidate and --reason");
  }
  request.set_candidate(args_.Get("candidate"));
  request.set_reason(args_.Get("reason"));
  request.set_exact_shape(args_.Has("exact"));
  v1::ForceResponse response;
  if (grpc::Status s = client_.Force(request, &response); !s.ok()) return RpcError("force", s);
  return Reply(response, [&] {
    out_ << "forced " << DTypeShortName(request.problem().dtype()) << " " << response.bucket()
         << (response.scope().empty() ? "" : " shape " + response.scope()) << " to "
         << request.candidate() << "\n";
  });
}

int Ctl::Unforce() {
  v1::UnforceRequest request;
  if (!ParseProblem(request.mutable_problem())) return kExitUsage;
  v1::Reach reach;
  if (!ParseReach(true, &reach)) return kExitUsage;
  request.set_reach(reach);
  request.set_exact_shape(args_.Has("exact"));
  v1::UnforceResponse response;
  if (grpc::Status s = client_.Unforce(request, &response); !s.ok()) return RpcError("unforce", s);
  return Reply(response, [&] {
    out_ << (response.removed() ? "removed the force on " : "no force on ")
         << DTypeShortName(request.problem().dtype()) << " " << response.bucket()
         << (response.scope().empty() ? "" : " shape " + response.scope()) << "\n";
  });
}

int Ctl::Invalidate() {
  v1::InvalidateRequest request;
  request.set_candidate(args_.Get("candidate"));
  if (args_.Has("dtype") && !args_.Has("m")) {
    const auto dtype = ParseDTypeName(args_.Get("dtype"));
    if (!dtype) return UsageError("--dtype: expected f32, f64, f16 or bf16");
    request.set_dtype(*dtype);
  }
  if (args_.Has("m") || args_.Has("n") || args_.Has("k")) {
    if (!ParseProblem(request.mutable_problem())) return kExitUsage;
  }
  request.set_all(args_.Has("all"));
  v1::Reach reach;
  if (!ParseReach(true, &reach)) return kExitUsage;
  request.set_reach(reach);
  if (request.candidate().empty() && request.dtype() == v1::DTYPE_UNSPECIFIED &&
      !request.has_problem() && !request.all()) {
    return UsageError("invalidate needs --candidate, --dtype, a problem (--m --n --k) or --all");
  }
  v1::InvalidateResponse response;
  if (grpc::Status s = client_.Invalidate(request, &response); !s.ok()) {
    return RpcError("invalidate", s);
  }
  return Reply(response, [&] {
    out_ << "removed " << response.removed() << " verdict" << (response.removed() == 1 ? "" : "s")
         << "\n";
  });
}

int Ctl::Tune() {
  const auto dtype = ParseDTypeName(args_.Get("dtype", "f32"));
  if (!dtype) return UsageError("--dtype: expected f32, f64, f16 or bf16");
  v1::TuneRequest request;
  for (const std::string& shape : args_.GetAll("shape")) {
    std::string error;
    if (!ParseShape(shape, *dtype, request.add_problems(), &error)) return UsageError(error);
  }
  if (request.problems().empty()) return UsageError("tune needs at least one --shape MxNxK");
  int failures = 0;
  grpc::Status status = client_.Tune(request, [&](const v1::TuneProgress& progress) {
    if (!progress.error().empty()) ++failures;
    if (json_) {
      // One JSON object per line, as each problem finishes.
      google::protobuf::util::JsonPrintOptions options;
      options.preserve_proto_field_names = true;
      options.always_print_primitive_fields = true;
      std::string line;
      if (google::protobuf::util::MessageToJsonString(progress, &line, options).ok()) {
        out_ << line << "\n";
      }
    } else {
      out_ << "[" << progress.index() + 1 << "/" << progress.total() << "] "
           << ProblemText(progress.problem()) << " -> ";
      if (progress.has_verdict()) {
        out_ << progress.verdict().winner() << "@v" << progress.verdict().winner_version() << " ("
             << progress.verdict().bucket() << "): " << progress.verdict().reason() << "\n";
      } else {
        out_ << "error: " << progress.error() << "\n";
      }
    }
    out_.flush();
  });
  if (!status.ok()) return RpcError("tune", status);
  return failures == 0 ? kExitOk : kExitRpcError;
}

int Ctl::Quarantine() {
  const std::vector<std::string>& pos = args_.positional();
  const std::string action = pos.size() > 1 ? pos[1] : "list";
  if (action == "list") {
    v1::ListQuarantineResponse response;
    if (grpc::Status s = client_.ListQuarantine(&response); !s.ok()) {
      return RpcError("quarantine list", s);
    }
    return Reply(response, [&] {
      Table table({"candidate", "version", "scope", "reason"});
      for (const v1::QuarantineEntry& q : response.entries()) {
        table.AddRow({q.candidate(), std::to_string(q.version()), q.scope(), q.reason()});
      }
      PrintTableOr(out_, table, "no quarantined candidates");
    });
  }
  if (action == "clear") {
    v1::ClearQuarantineRequest request;
    request.set_candidate(args_.Get("candidate"));
    v1::Reach reach;
    if (!ParseReach(false, &reach)) return kExitUsage;
    request.set_reach(reach);
    v1::ClearQuarantineResponse response;
    if (grpc::Status s = client_.ClearQuarantine(request, &response); !s.ok()) {
      return RpcError("quarantine clear", s);
    }
    return Reply(response, [&] {
      out_ << "removed " << response.removed() << " quarantine entr"
           << (response.removed() == 1 ? "y" : "ies") << "\n";
    });
  }
  if (action == "add") {
    if (!args_.Has("candidate") || !args_.Has("reason")) {
      return UsageError("quarantine add needs --candidate and --reason");
    }
    v1::QuarantineRequest request;
    request.set_candidate(args_.Get("candidate"));
    request.set_scope(args_.Get("scope", "*"));
    request.set_reason(args_.Get("reason"));
    v1::Reach reach;
    if (!ParseReach(false, &reach)) return kExitUsage;
    request.set_reach(reach);
    if (grpc::Status s = client_.Quarantine(request); !s.ok()) return RpcError("quarantine add", s);
    return Reply(v1::QuarantineResponse(), [&] {
      out_ << "quarantined " << request.candidate() << " (" << request.scope() << ")\n";
    });
  }
  return UsageError("quarantine: expected list, clear or add, got \"" + action + "\"");
}


int Ctl::Regions() {
  v1::ListRegionsResponse response;
  if (grpc::Status s = client_.ListAllRegions(&response); !s.ok()) return RpcError("regions", s);
  return Reply(response, [&] {
    Table table({"id", "kind", "bytes", "owner", "label"});
    for (const v1::Region& r : response.regions()) {
      table.AddRow({r.id(), EnumSuffix(v1::RegionKind_Name(r.kind()), "REGION_KIND_"),
                    std::to_string(r.bytes()), r.owner().address(), r.label()});
    }
    PrintTableOr(out_, table, "no regions");
  });
}

int Ctl::Tensors() {
  v1::ListTensorsResponse response;
  if (grpc::Status s = client_.ListAllTensors(&response); !s.ok()) return RpcError("tensors", s);
  return Reply(response, [&] {
    Table table({"handle", "bytes", "owner", "label"});
    for (const v1::Tensor& t : response.tensors()) {
      table.AddRow({t.handle(), std::to_string(t.bytes()), t.owner().address(), t.label()});
    }
    PrintTableOr(out_, table, "no resident tensors");
  });
}

int Ctl::Info() {
  v1::ServerInfoResponse response;
  if (grpc::Status s = client_.ServerInfo(&response); !s.ok()) return RpcError("info", s);
  return Reply(response, [&] {
    std::vector<std::pair<std::string, std::string>> fields = {
        {"server", client_.options().server},
        {"version", response.version()},
        {"backend", response.backend()},
        {"device", response.device_name()},
        {"arch", response.arch()},
        {"uuid", response.uuid().empty() ? "-" : response.uuid()},
        {"tuning", response.tuning()},
        {"candidates", std::to_string(response.candidates())},
        {"verdicts", std::to_string(response.verdicts())},
        {"measurements", std::to_string(response.measurements()) + " since start"},
        {"store", response.store_path()},
        {"fingerprint", response.fingerprint()}};
    std::map<std::string, std::string> versions(response.versions().begin(),
                                                response.versions().end());
    for (const auto& [name, version] : versions) fields.push_back({name, version});
    PrintFields(out_, fields);
  });
}

int Ctl::Health() {
  HealthStatus status = HealthStatus::kUnknown;
  const std::string service = args_.Get("service");
  grpc::Status rpc = client_.Health(service, &status);
  if (!rpc.ok()) {
    RpcError("health", rpc);
    return kExitUnhealthy;
  }
  if (json_) {
    google::protobuf::Struct out;
    AddField(&out, "service", service);
    AddField(&out, "status", HealthStatusName(status));
    PrintJson(out);
  } else {
    out_ << HealthStatusName(status) << "\n";
  }
  return status == HealthStatus::kServing ? kExitOk : kExitUnhealthy;
}

}  // namespace arbiter::client
