// arbiterctl's subcommands over an ArbiterClient: each parses its options,
// makes its calls, and prints either aligned tables (the default) or JSON
// (--json, for scripts). Returns the process exit code:
//   0 success, 1 the daemon returned an error, 2 a usage error,
//   3 matmul's result check failed, 4 health is not SERVING.
//
// Not thread-safe; one command per process.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "client/arbiter_client.h"
#include "client/args.h"
#include "client/matmul_check.h"

namespace arbiter::client {

enum ExitCode { kExitOk = 0, kExitRpcError = 1, kExitUsage = 2, kExitMismatch = 3, kExitUnhealthy = 4 };

class Ctl {
 public:
  Ctl(ArbiterClient& client, const Args& args, std::ostream& out, std::ostream& err)
      : client_(client), args_(args), out_(out), err_(err), json_(args.Has("json")) {}
  Ctl(const Ctl&) = delete;
  Ctl& operator=(const Ctl&) = delete;

  // Runs `command` (the first positional argument).
  int Run(const std::string& command);

  static void PrintUsage(std::ostream& os);
  // Every option and switch any subcommand accepts.
  static const std::set<std::string>& Options();
  static const std::set<std::string>& Switches();

 private:
  int Matmul();
  int Select();
  int Candidates();
  int Verdicts();
  int Force();
  int Unforce();
  int Invalidate();
  int Tune();
  int Quarantine();
  int Regions();
  int Tensors();
  int Info();
  int Health();

  // --m --n --k --dtype (f32 when absent) into `p`; prints the usage error.
  bool ParseProblem(v1::Problem* p);
  // --reach (or, where `scope_is_reach`, --scope) fleet|node; false after a usage error.
  bool ParseReach(bool scope_is_reach, v1::Reach* reach);
  // matmul --operands device: A and B written into a region, C read back from it;
  // `region_kind` names the region's kind ("memfd", "ipc", "vmm").
  int DeviceMatmul(v1::MatmulRequest* request, const Operands& ops, v1::MatmulResponse* response,
                   std::string* c, std::string* region_kind);
  // --determinism and --tuning (unspecified when absent); false after a usage error.
  bool ParseSelectOptions(v1::Determinism* determinism, v1::TuningPolicy* tuning);
  // The problem and selection options of a MatmulRequest or SelectRequest, which
  // share those fields; false after a usage error.
  template <typename Request>
  bool ParseSelectRequest(Request* request);
  // matmul's --seed (random when absent) and --samples; false after a usage error.
  bool ParseCheckOptions(uint64_t* seed, CheckOptions* check_options);
  // The accuracy budget `candidate` declares for `dtype` (the contract it was admitted
  // on), or the dtype's default where the daemon does not say; `source` names which.
  v1::AccuracyBudget ContractBudget(const std::string& candidate, v1::DType dtype,
                                    std::string* source);
  struct MatmulOutcome;
  void PrintMatmul(const MatmulOutcome& m);
  int RpcError(const char* what, const grpc::Status& status);
  int UsageError(const std::string& message);
  void PrintJson(const google::protobuf::Message& message);
  // `response` as JSON under --json, else as `print` writes it for people; kExitOk.
  int Reply(const google::protobuf::Message& response, const std::function<void()>& print);
  void PrintVerdict(const v1::Verdict& v);

  ArbiterClient& client_;
  const Args& args_;
  std::ostream& out_;
  std::ostream& err_;
  const bool json_;
};

// "64x32x128" or "bf16:64x32x128" (dtype prefix overrides `dtype`).
bool ParseShape(const std::string& text, v1::DType dtype, v1::Problem* p, std::string* error);
// "12.3 us", "1.234 ms", "2.5 s".
std::string FormatSeconds(double seconds);

}  // namespace arbiter::client
