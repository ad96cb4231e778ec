#include "client/ctl.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "client/completion_events.h"
#include "client/device_operands.h"
#include "client/dtype_codec.h"
#include "client/matmul_check.h"
#include "client/shared_memory.h"
#include "client/table.h"

namespace arbiter::client {
namespace {

// "VERDICT_SOURCE_MEASURED" -> "measured".
std::string EnumSuffix(const std::string& name, const std::string& prefix) {
  std::string out = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string Upper(std::string text) {
  for (char& ch : text) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return text;
}

std::string SourceName(v1::VerdictSource s) {
  return EnumSuffix(v1::VerdictSource_Name(s), "VERDICT_SOURCE_");
}

std::string DeterminismShort(v1::Determinism d) {
  return EnumSuffix(v1::Determinism_Name(d), "DETERMINISM_");
}

std::string ProblemText(const v1::Problem& p) {
  return DTypeShortName(p.dtype()) + " " + std::to_string(p.m()) + "x" + std::to_string(p.n()) +
         "x" + std::to_string(p.k());
}

std::string Fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string Sci(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2e", value);
  return buf;
}

// `table`, or the line `none` when it has no rows.
void PrintTableOr(std::ostream& os, const Table& table, const char* none) {
  if (table.empty()) {
    os << none << "\n";
  } else {
    table.Print(os);
  }
}

// Key/value lines with the values aligned.
void PrintFields(std::ostream& os, const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size());
  for (const auto& [key, value] : fields) {
    os << key << std::string(width - key.size() + 2, ' ') << value << "\n";
  }
}

void AddField(google::protobuf::Struct* s, const std::string& key, const std::string& value) {
  (*s->mutable_fields())[key].set_string_value(value);
}
void AddField(google::protobuf::Struct* s, const std::string& key, double value) {
  (*s->mutable_fields())[key].set_number_value(value);
}
void AddBool(google::protobuf::Struct* s, const std::string& key, bool value) {
  (*s->mutable_fields())[key].set_bool_value(value);
}

}  // namespace

std::string FormatSeconds(double seconds) {
  if (seconds <= 0) return "-";
  if (seconds < 1e-3) return Fixed(seconds * 1e6, 1) + " us";
  if (seconds < 1) return Fixed(seconds * 1e3, 3) + " ms";
  return Fixed(seconds, 3) + " s";
}

bool ParseShape(const std::string& text, v1::DType dtype, v1::Problem* p, std::string* error) {
  std::string dims = text;
  if (const size_t colon = text.find(':'); colon != std::string::npos) {
    const auto parsed = ParseDTypeName(text.substr(0, colon));
    if (!parsed) {
      *error = "shape \"" + text + "\": unknown dtype; expected f32, f64, f16 or bf16";
      return false;
    }
    dtype = *parsed;
    dims = text.substr(colon + 1);
  }
  long long m = 0, n = 0, k = 0;
  char tail = 0;
  if (std::sscanf(dims.c_str(), "%lldx%lldx%lld%c", &m, &n, &k, &tail) != 3) {
    *error = "shape \"" + text + "\": expected MxNxK, e.g. 64x64x64 or bf16:128x64x256";
    return false;
  }
  p->set_dtype(dtype);
  p->set_m(m);
  p->set_n(n);
  p->set_k(k);
  return true;
}

const std::set<std::string>& Ctl::Options() {
  static const std::set<std::string> options = {
      "server",  "token-file", "timeout", "m",      "n",           "k",       "dtype",
      "seed",    "samples",    "shape",   "bucket", "candidate",   "reason",  "scope",
      "service", "determinism", "tuning", "operands", "region-kind", "reach", "completion"};
  return options;
}

const std::set<std::string>& Ctl::Switches() {
  static const std::set<std::string> switches = {"json", "all", "help", "exact"};
  return switches;
}

void Ctl::PrintUsage(std::ostream& os) {
  os << R"(usage: arbiterctl [--server ADDR] [--token-file PATH] [--timeout S] [--json] COMMAND [options]

commands:
  matmul --m M --n N --k K [--dtype f32|f64|f16|bf16] [--seed S] [--samples N]
         [--determinism nondeterministic|run_to_run|batch_invariant] [--tuning sync|async|off]
         [--operands inline|device [--region-kind auto|memfd|ipc|vmm] [--completion sync|event]]
      run C = A*B on random operands and check a sample of C against a local f64 reference;
      --operands device puts A, B and C in one region shared with the daemon (needs a
      unix: --server on the same node: host shared memory for a CPU daemon, memory on
      its GPU for a CUDA one) and sends no operand bytes; C is poisoned first, and with
      --completion event the reply comes before the kernel ends and arbiterctl waits on
      the completion event it names (CUDA daemons only)
  select --m M --n N --k K [--dtype D] [--determinism ..] [--tuning ..]
      which candidate would serve the problem, and why
  candidates                               every candidate, its contract and eligibility
  verdicts [--dtype D] [--bucket B] [--candidate NAME]
                                           stored verdicts with their figures, and forces
  force --candidate NAME --reason TEXT --m M --n N --k K [--dtype D] [--exact] [--scope fleet|node]
                                           pin the shape's bucket (--exact: that shape alone)
  unforce --m M --n N --k K [--dtype D] [--exact] [--scope fleet|node]
  invalidate [--candidate NAME] [--dtype D] [--m M --n N --k K] [--all] [--scope fleet|node]
  tune --shape MxNxK [--shape ...] [--dtype D]
                                           measure each shape's bucket now (progress streamed)
  quarantine list | clear [--candidate NAME] | add --candidate NAME --reason TEXT [--scope S]
         [--reach fleet|node]
  regions                                  every client's regions (memory shared for zero-copy)
  tensors                                  every client's resident tensors
  info                                     the daemon, its device and its store
  health [--service NAME]                  exit 0 only when SERVING

Changes reach every daemon sharing the store (fleet, the default); --scope node (quarantine:
--reach node) keeps one to this daemon, in its memory until it restarts.
--server defaults to 127.0.0.1:50051. --token-file sends "authorization: Bearer <token>".
exit codes: 0 ok, 1 the daemon returned an error, 2 usage, 3 matmul check failed, 4 not serving
)";
}

int Ctl::Run(const std::string& command) {
  if (command == "matmul") return Matmul();
  if (command == "select") return Select();
  if (command == "candidates") return Candidates();
  if (command == "verdicts") return Verdicts();
  if (command == "force") return Force();
  if (command == "unforce") return Unforce();
  if (command == "invalidate") return Invalidate();
  if (command == "tune") return Tune();
  if (command == "quarantine") return Quarantine();
  if (command == "regions") return Regions();
  if (command == "tensors") return Tensors();
  if (command == "info") return Info();
  if (command == "health") return Health();
  return UsageError("unknown command \"" + command + "\"");
}

int Ctl::RpcError(const char* what, const grpc::Status& status) {
  static const char* const kCodes[] = {
      "OK",        "CANCELLED",         "UNKNOWN",          "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",   "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",      "DATA_LOSS",
      "UNAUTHENTICATED"};
  const int code = static_cast<int>(status.error_code());
  err_ << "arbiterctl: " << what << ": "
       << (code >= 0 && code <= 16 ? kCodes[code] : std::to_string(code).c_str()) << ": "
       << status.error_message() << "\n";
  return kExitRpcError;
}

int Ctl::UsageError(const std::string& message) {
  err_ << "arbiterctl: " << message << " (see arbiterctl --help)\n";
  return kExitUsage;
}

int Ctl::Reply(const google::protobuf::Message& response, const std::function<void()>& print) {
  if (json_) {
    PrintJson(response);
  } else {
    print();
  }
  return kExitOk;
}

void Ctl::PrintJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) {
    err_ << "arbiterctl: cannot print " << message.GetTypeName() << " as JSON\n";
    return;
  }
  out_ << text;
  if (text.empty() || text.back() != '\n') out_ << "\n";
}

bool Ctl::ParseProblem(v1::Problem* p) {
  std::string error;
  const std::string dtype_name = args_.Get("dtype", "f32");
  const auto dtype = ParseDTypeName(dtype_name);
  if (!dtype) {
    UsageError("--dtype: expected f32, f64, f16 or bf16, got \"" + dtype_name + "\"");
    return false;
  }
  const auto m = args_.GetInt("m", &error);
  const auto n = m ? args_.GetInt("n", &error) : std::nullopt;
  const auto k = n ? args_.GetInt("k", &error) : std::nullopt;
  if (!k) {
    UsageError(error);
    return false;
  }
  p->set_dtype(*dtype);
  p->set_m(*m);
  p->set_n(*n);
  p->set_k(*k);
  return true;
}

bool Ctl::ParseSelectOptions(v1::Determinism* determinism, v1::TuningPolicy* tuning) {
  const std::string d = args_.Get("determinism");
  if (d.empty()) {
    *determinism = v1::DETERMINISM_UNSPECIFIED;
  } else if (!v1::Determinism_Parse("DETERMINISM_" + Upper(d), determinism)) {
    UsageError("--determinism: expected nondeterministic, run_to_run or batch_invariant, got \"" + d + "\"");
    return false;
  }
  const std::string t = args_.Get("tuning");
  if (t.empty()) {
    *tuning = v1::TUNING_POLICY_UNSPECIFIED;
  } else if (t == "sync") {
    *tuning = v1::TUNING_POLICY_SYNC;
  } else if (t == "async") {
    *tuning = v1::TUNING_POLICY_ASYNC;
  } else if (t == "off") {
    *tuning = v1::TUNING_POLICY_OFF;
  } else {
    UsageError("--tuning: expected sync, async or off, got \"" + t + "\"");
    return false;
  }
  return true;
}

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
  std::string operands;  // inline or device
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
  std::string c;
  if (operands == "device") {
    if (int code = DeviceMatmul(&request, ops, &response, &c); code != kExitOk) return code;
  } else {
    request.set_a(ops.a);
    request.set_b(ops.b);
    if (grpc::Status s = client_.Matmul(request, &response); !s.ok()) return RpcError("matmul", s);
    c = std::move(*response.mutable_c());
  }

  std::string budget_source;
  const v1::AccuracyBudget budget = ContractBudget(response.candidate(), p.dtype(), &budget_source);
  const CheckResult check = CheckMatmul(p, ops, c, budget, check_options);
  PrintMatmul({p, response, check, budget_source, seed, operands});
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
      {"operands", m.operands == "device" ? "device (zero-copy region)" : "inline"},
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

int Ctl::DeviceMatmul(v1::MatmulRequest* request, const Operands& ops,
                      v1::MatmulResponse* response, std::string* c) {
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
