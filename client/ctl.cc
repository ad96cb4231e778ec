#include "client/ctl.h"

#include <google/protobuf/util/json_util.h>

#include "client/ctl_format.h"
#include "client/dtype_codec.h"

namespace arbiter::client {

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
      its GPU for a CUDA one, or with --region-kind memfd host shared memory that a
      CUDA daemon copies to its GPU and back) and sends no operand bytes; C is
      poisoned first, and with --completion event the reply comes before the kernel
      ends and arbiterctl waits on the completion event it names (C on a GPU only)
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

}  // namespace arbiter::client
