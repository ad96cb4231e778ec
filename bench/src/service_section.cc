#include "bench/src/service_section.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/src/rpc_load.h"
#include "bench/src/sections.h"
#include "client/arbiter_client.h"
#include "client/completion_events.h"
#include "client/device_operands.h"
#include "client/matmul_check.h"
#include "client/session.h"
#include "client/shared_memory.h"
#include "engine/measurer.h"

namespace arbiter::bench {
namespace {

// An arbiterd this bench started; stopped (SIGTERM, then waited for) when it goes.
class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const ServiceOptions& o,
                                                       const std::string& listen,
                                                       const std::string& port_file,
                                                       int metrics_port, const std::string& log) {
    std::vector<std::string> args = {o.arbiterd, "--listen=" + listen, "--backend=" + o.backend,
                                     "--store=:memory:", "--tuning=sync", "--log_level=warn",
                                     absl::StrCat("--metrics_listen=127.0.0.1:", metrics_port)};
    if (!port_file.empty()) args.push_back("--port_file=" + port_file);
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      if (f != nullptr) dup2(fileno(stdout), fileno(stderr));
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    return std::unique_ptr<Daemon>(new Daemon(pid));
  }
  ~Daemon() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  bool Running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }
  // Its user + system CPU time so far (/proc/<pid>/stat, fields 14 and 15); 0 if unreadable.
  double CpuSeconds() const {
    std::ifstream in(absl::StrCat("/proc/", pid_, "/stat"));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t comm_end = text.rfind(')');  // the name may hold spaces
    if (comm_end == std::string::npos) return 0;
    std::istringstream fields(text.substr(comm_end + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
    }
    return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

 private:
  explicit Daemon(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

// The port arbiterd wrote once serving; polls the file (the daemon's only signal) for 30 s.
absl::StatusOr<int> WaitForPort(const std::string& path, const Daemon& daemon) {
  for (int i = 0; i < 300; ++i) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0) return port;
    if (!daemon.Running()) return absl::UnavailableError("arbiterd exited before serving");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("arbiterd wrote no port to ", path, " in 30 s"));
}

// A client of its own connection, as a separate client process would have.
client::ClientOptions Options(const std::string& server) {
  client::ClientOptions o;
  o.server = server;
  o.own_connection = true;
  return o;
}

// A loopback TCP port free now (bound, then released for the daemon to bind).
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return absl::UnavailableError("no free loopback port");
  return ntohs(addr.sin_port);
}

// The daemon's arbiter_dispatch_stage_seconds: stage -> (sum, count).
using StageTotals = std::map<std::string, std::pair<double, double>>;

// Scrapes http://127.0.0.1:port/metrics (the endpoint answers and closes).
absl::StatusOr<StageTotals> ScrapeStages(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string text;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string get = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, get.data(), get.size()) == static_cast<ssize_t>(get.size())) {
      char buf[1 << 16];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (text.empty()) return absl::UnavailableError(absl::StrCat("no answer from 127.0.0.1:", port, "/metrics"));
  StageTotals totals;
  std::istringstream lines(text);
  const std::string family = "arbiter_dispatch_stage_seconds_";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(family, 0) != 0) continue;
    const bool sum = line.compare(family.size(), 4, "sum{") == 0;
    const bool count = line.compare(family.size(), 6, "count{") == 0;
    const size_t at = line.find("stage=\""), end = line.find('"', at + 7), space = line.rfind(' ');
    double value = 0;
    if ((!sum && !count) || at == std::string::npos || end == std::string::npos ||
        !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    auto& t = totals[line.substr(at + 7, end - at - 7)];
    (sum ? t.first : t.second) = value;
  }
  return totals;
}

// One stage's seconds between two scrapes, and how many calls it recorded.
std::pair<double, double> StageDelta(const StageTotals& before, const StageTotals& after,
                                     const std::string& stage) {
  const auto b = before.find(stage);
  const auto a = after.find(stage);
  if (a == after.end()) return {0, 0};
  return {a->second.first - (b == before.end() ? 0 : b->second.first),
          a->second.second - (b == before.end() ? 0 : b->second.second)};
}

// The stages' order in the tables, as the daemon names them (server/metrics.h).
constexpr const char* kStages[] = {"receive", "prepare", "lease", "h2d",
                                   "launch",  "kernel",  "d2h",   "send"};

v1::DType WireDType(DType d) { return static_cast<v1::DType>(static_cast<int>(d)); }

v1::Problem WireProblem(const Problem& p) {
  v1::Problem out;
  out.set_dtype(WireDType(p.dtype));
  out.set_m(p.m);
  out.set_n(p.n);
  out.set_k(p.k);
  return out;
}

// A bytes-path Matmul of `p` on the operands `a` and `b`.
v1::MatmulRequest BytesRequest(const Problem& p, const std::vector<uint8_t>& a,
                               const std::vector<uint8_t>& b) {
  v1::MatmulRequest req;
  *req.mutable_problem() = WireProblem(p);
  req.set_a(a.data(), a.size());
  req.set_b(b.data(), b.size());
  return req;
}

// The same work as one Matmul, in-process: copy A and B in, run `candidate`, copy C out.
absl::StatusOr<double> InProcess(BenchDevice& dev, const Problem& p, const std::string& candidate,
                                 const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                 int repeats) {
  const RegisteredCandidate* c = dev.registry->Find(candidate);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("in-process: no candidate ", candidate));
  const CandidateMember* member = c->spec.Member(p.dtype);
  if (member == nullptr) return absl::NotFoundError(absl::StrCat(candidate, " has no ", DTypeName(p.dtype)));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> da, dev.backend->Allocate(p.a_bytes()));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> db, dev.backend->Allocate(p.b_bytes()));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> dc, dev.backend->Allocate(p.c_bytes()));
  std::vector<uint8_t> c_host(p.c_bytes());
  std::vector<double> samples;
  for (int i = 0; i <= repeats; ++i) {  // the first is a warm-up
    const Clock::time_point t0 = Clock::now();
    RETURN_IF_ERROR(dev.stream->CopyToDevice(*da, a.data(), a.size()));
    RETURN_IF_ERROR(dev.stream->CopyToDevice(*db, b.data(), b.size()));
    RETURN_IF_ERROR(member->run(GemmArgs{p, da->data(), db->data(), dc->data(), dev.stream.get()}));
    RETURN_IF_ERROR(dev.stream->CopyToHost(c_host.data(), *dc, c_host.size()));
    RETURN_IF_ERROR(dev.stream->Synchronize());
    if (i > 0) samples.push_back(Since(t0));
  }
  return Summarize(samples).median;
}

// The accuracy budget `candidate` declares for `dtype` (ListCandidates), which
// its results are checked against; the client's default when it is not listed.
v1::AccuracyBudget BudgetOf(client::ArbiterClient& ctl, const std::string& candidate,
                            v1::DType dtype) {
  v1::ListCandidatesResponse candidates;
  if (ctl.ListCandidates(&candidates).ok()) {
    for (const v1::CandidateInfo& c : candidates.candidates()) {
      if (c.name() != candidate) continue;
      for (const v1::MemberContract& member : c.members()) {
        if (member.dtype() == dtype) return member.accuracy();
      }
    }
  }
  return client::DefaultBudget(dtype);
}

// The reply's C (a sample of its rows) against the reference of `ops`, within
// the budget its candidate declares: a fast wrong answer is no answer. `call`
// names the call in the error.
absl::Status CheckReply(client::ArbiterClient& ctl, const v1::Problem& problem,
                        const client::Operands& ops, const std::string& c,
                        const std::string& candidate, const std::string& call) {
  const client::CheckResult check = client::CheckMatmul(
      problem, ops, c, BudgetOf(ctl, candidate, problem.dtype()), client::CheckOptions{});
  if (!check.passed()) {
    return absl::DataLossError(
        absl::StrCat(call, " by ", candidate, ": C is wrong: ", check.first_failure));
  }
  return absl::OkStatus();
}

// Median latency of `calls` empty RPCs (grpc.health.v1 Check) in a row on `client`.
absl::StatusOr<double> EmptyRpcP50(client::ArbiterClient& client, int calls) {
  std::vector<double> lat;
  for (int i = 0; i < calls; ++i) {
    const Clock::time_point t0 = Clock::now();
    client::HealthStatus h;
    if (grpc::Status s = client.Health("", &h); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("empty RPC: ", s.error_message()));
    }
    lat.push_back(Since(t0));
  }
  return Quantile(lat, 0.5);
}

// A client that never sleeps waiting for its reply: its own channel, each call
// started on a completion queue that it polls without blocking until the call
// is done. ArbiterClient's calls block, so its thread sleeps for the whole call
// and is woken when the reply arrives; set side by side, the two say how much
// of an end to end is the client's own wake-up rather than the daemon's work.
class PollingClient {
 public:
  // `session`: the token of the session whose regions the calls name ("": none).
  PollingClient(const std::string& server, std::string session)
      : channel_(Channel(server)), stub_(channel_), session_(std::move(session)) {}

  grpc::Status Matmul(const v1::MatmulRequest& request, v1::MatmulResponse* response) {
    grpc::ByteBuffer reply;
    const std::string bytes = request.SerializeAsString();
    grpc::Slice slice(bytes);
    grpc::Status status = Call("/arbiter.v1.Dispatch/Matmul", grpc::ByteBuffer(&slice, 1), &reply);
    if (!status.ok()) return status;
    std::vector<grpc::Slice> slices;
    std::string parsed;
    if (!reply.Dump(&slices).ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "unreadable reply");
    for (const grpc::Slice& s : slices) parsed.append(reinterpret_cast<const char*>(s.begin()), s.size());
    if (!response->ParseFromString(parsed)) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "the reply is not a MatmulResponse");
    }
    return grpc::Status::OK;
  }
  // grpc.health.v1 Check of the server as a whole (an empty request).
  grpc::Status Health() {
    grpc::ByteBuffer reply;
    grpc::Slice empty;
    return Call("/grpc.health.v1.Health/Check", grpc::ByteBuffer(&empty, 1), &reply);
  }

 private:
  static std::shared_ptr<grpc::Channel> Channel(const std::string& server) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
  }
  grpc::Status Call(const std::string& method, const grpc::ByteBuffer& request,
                    grpc::ByteBuffer* reply) {
    grpc::ClientContext context;
    if (!session_.empty()) context.AddMetadata(client::kSessionMetadata, session_);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
        stub_.PrepareUnaryCall(&context, method, request, &cq_);
    call->StartCall();
    grpc::Status status;
    call->Finish(reply, &status, this);
    void* tag = nullptr;
    bool ok = false;
    // Polled, never waited on: a zero deadline returns at once when nothing is ready.
    while (cq_.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) !=
           grpc::CompletionQueue::GOT_EVENT) {
    }
    return status;
  }

  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  const std::string session_;
};

struct ZeroCopyRun {
  std::string kind, candidate;
  double e2e_s = 0, device_s = 0;
  double polling_e2e_s = 0;  // the same calls from a PollingClient
  // The PollingClient's empty RPC, each after the client spun for the kernel's
  // device time: the daemon's threads sat idle as long as during a Matmul, so
  // what they take to wake is in it too.
  double polling_idle_empty_s = 0;
  // The daemon's stages of the timed (blocking) calls, in kStages' order: the
  // mean of each over the calls that recorded it; -1 where none did.
  std::vector<double> stages;
  // The same calls with completion EVENT, each timed until the client's wait on
  // its event (cudaEventSynchronize) returned; -1 where the daemon has no events.
  double event_e2e_s = -1;
};

// `repeats` Matmuls of `req` with completion EVENT (the blocking client), each
// timed from the call to the return of the client's wait on the event it names;
// the first, on C poisoned before it, is checked against the reference, not timed.
absl::StatusOr<double> EventMatmuls(client::ArbiterClient& ctl, client::CompletionEvents& events,
                                    client::DeviceOperands& memory, v1::MatmulRequest req,
                                    size_t c_at, const client::Operands& ops, int repeats) {
  const Problem p{static_cast<DType>(req.problem().dtype()), req.problem().m(), req.problem().n(),
                  req.problem().k()};
  std::vector<double> e2e;
  for (int i = 0; i <= repeats; ++i) {
    if (i == 0) {
      if (grpc::Status s = memory.Write(c_at, std::string(p.c_bytes(), '\xff')); !s.ok()) {
        return absl::InternalError(absl::StrCat("poison C: ", s.error_message()));
      }
    }
    events.Prepare(&req);
    v1::MatmulResponse resp;
    const Clock::time_point t0 = Clock::now();
    grpc::Status s = ctl.Matmul(req, &resp);
    if (s.ok()) s = events.Synchronize(resp);
    const double seconds = Since(t0);
    if (!s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("zero-copy Matmul ", p.ToString(), " (completion EVENT): ", s.error_message()));
    }
    if (i > 0) {
      e2e.push_back(seconds);
      continue;
    }
    std::string c;
    if (grpc::Status r = memory.Read(c_at, p.c_bytes(), &c); !r.ok()) {
      return absl::InternalError(absl::StrCat("read C: ", r.error_message()));
    }
    RETURN_IF_ERROR(CheckReply(ctl, req.problem(), ops, c, resp.candidate(),
                               absl::StrCat("zero-copy Matmul ", p.ToString(), " (completion EVENT)")));
  }
  return Summarize(e2e).median;
}

// Matmul on A, B and C in one region of the daemon's device memory (the
// client's session must be open): operands written once, C checked against the
// reference on the first call, then `repeats` timed calls.
// The stages' deltas between two scrapes come from the histogram's sums and
// counts; `polling` makes the same timed calls again from a PollingClient.
// With `events`, the same calls again with completion EVENT (EventMatmuls).
absl::StatusOr<ZeroCopyRun> ZeroCopyMatmul(client::ArbiterClient& ctl, PollingClient& polling,
                                           client::CompletionEvents* events, int metrics_port,
                                           const v1::ServerInfoResponse& info, const Problem& p,
                                           const std::vector<uint8_t>& a,
                                           const std::vector<uint8_t>& b, int repeats) {
  v1::MatmulRequest req;
  *req.mutable_problem() = WireProblem(p);
  const client::Operands ops{std::string(a.begin(), a.end()), std::string(b.begin(), b.end())};
  const size_t a_at = 0, b_at = client::AlignUp(a.size()), c_at = b_at + client::AlignUp(b.size());
  std::unique_ptr<client::DeviceOperands> memory;
  if (grpc::Status s = client::DeviceOperands::Create(info, "auto", c_at + p.c_bytes(), &memory); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("zero-copy operands: ", s.error_message()));
  }
  if (grpc::Status s = memory->Write(a_at, ops.a); !s.ok()) return absl::InternalError(s.error_message());
  if (grpc::Status s = memory->Write(b_at, ops.b); !s.ok()) return absl::InternalError(s.error_message());
  v1::Region region;
  if (grpc::Status s = memory->Register(ctl, "arbiter-bench", &region); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("register region: ", s.error_message()));
  }
  for (auto [ref, at] : {std::pair{req.mutable_a_ref(), a_at}, {req.mutable_b_ref(), b_at},
                         {req.mutable_c_ref(), c_at}}) {
    ref->set_region(region.id());
    ref->set_offset(static_cast<int64_t>(at));
  }
  ZeroCopyRun run;
  run.kind = memory->kind_name();
  absl::Status status = absl::OkStatus();
  std::vector<double> e2e, device, polled;
  StageTotals before, after;
  for (int i = 0; i <= repeats && status.ok(); ++i) {  // the first is checked, not timed
    if (i == 1) {
      absl::StatusOr<StageTotals> scraped = ScrapeStages(metrics_port);
      if (!scraped.ok()) {
        status = scraped.status();
        break;
      }
      before = *std::move(scraped);
    }
    v1::MatmulResponse resp;
    const Clock::time_point t0 = Clock::now();
    if (grpc::Status s = ctl.Matmul(req, &resp); !s.ok()) {
      status = absl::UnavailableError(absl::StrCat("zero-copy Matmul ", p.ToString(), ": ", s.error_message()));
      break;
    }
    const double seconds = Since(t0);
    run.candidate = resp.candidate();
    if (i == 0) {
      std::string c;
      if (grpc::Status s = memory->Read(c_at, p.c_bytes(), &c); !s.ok()) {
        status = absl::InternalError(absl::StrCat("read C: ", s.error_message()));
        break;
      }
      status = CheckReply(ctl, req.problem(), ops, c, resp.candidate(),
                          absl::StrCat("zero-copy Matmul ", p.ToString()));
      continue;
    }
    e2e.push_back(seconds);
    device.push_back(resp.device_seconds());
  }
  // The send stage is recorded once gRPC is done with a call, which may be just
  // after its reply arrived: up to 5 s for the last one's.
  for (int poll = 0; poll < 500 && status.ok(); ++poll) {
    absl::StatusOr<StageTotals> scraped = ScrapeStages(metrics_port);
    if (!scraped.ok()) {
      status = scraped.status();
      break;
    }
    after = *std::move(scraped);
    if (StageDelta(before, after, "send").second >= repeats) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a bench's poll, not a test's
  }
  if (events != nullptr && status.ok()) {
    absl::StatusOr<double> by_event = EventMatmuls(ctl, *events, *memory, req, c_at, ops, repeats);
    if (by_event.ok()) run.event_e2e_s = *by_event;
    status = by_event.status();
  }
  for (int i = 0; i < repeats && status.ok(); ++i) {
    v1::MatmulResponse resp;
    const Clock::time_point t0 = Clock::now();
    if (grpc::Status s = polling.Matmul(req, &resp); !s.ok()) {
      status = absl::UnavailableError(
          absl::StrCat("zero-copy Matmul ", p.ToString(), " (polling client): ", s.error_message()));
      break;
    }
    polled.push_back(Since(t0));
  }
  ctl.UnregisterRegion(region.id());  // the session's end would release it too
  RETURN_IF_ERROR(status);
  run.e2e_s = Summarize(e2e).median;
  run.device_s = Summarize(device).median;
  run.polling_e2e_s = Summarize(polled).median;
  std::vector<double> idle_empty;
  for (int i = 0; i < 50; ++i) {
    const Clock::time_point idle = Clock::now();
    while (Since(idle) < run.device_s) {
    }  // spinning, as the polling client does during a Matmul
    const Clock::time_point t0 = Clock::now();
    if (grpc::Status s = polling.Health(); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("empty RPC (polling client): ", s.error_message()));
    }
    idle_empty.push_back(Since(t0));
  }
  run.polling_idle_empty_s = Quantile(idle_empty, 0.5);
  for (const char* stage : kStages) {
    const auto [seconds, calls] = StageDelta(before, after, stage);
    run.stages.push_back(calls > 0 ? seconds / calls : -1);
  }
  return run;
}

// The bytes path's wire alone, `o.wire_mib` request sizes on `ctl`: f32 1 x 1 x K
// Matmuls (A and B each half the request, C one element: next to no kernel).
// Each timed call's daemon stages come from scrapes before and after it (the
// receive and send stages are recorded when gRPC is done with the call, so the
// second scrape waits for them). The first call of a size measures its bucket
// and is checked against the reference, not timed.
absl::Status WireRows(client::ArbiterClient& ctl, int metrics_port, const std::string& transport,
                      const ServiceOptions& o, Table* table) {
  for (int64_t mib : o.wire_mib) {
    const int64_t k = mib * (int64_t{1} << 20) / 8;
    const Problem p{DType::kF32, 1, 1, k};
    std::vector<uint8_t> a(p.a_bytes()), b(p.b_bytes());
    FillRandom(p.dtype, a.data(), p.m * p.k, 3);
    FillRandom(p.dtype, b.data(), p.k * p.n, 4);
    const v1::MatmulRequest req = BytesRequest(p, a, b);
    const double message = static_cast<double>(req.ByteSizeLong());
    std::vector<double> e2e, rest;
    std::vector<std::vector<double>> stages(std::size(kStages));  // per call, in kStages' order
    for (int i = 0; i <= o.matmul_repeats; ++i) {
      ASSIGN_OR_RETURN(const StageTotals before, ScrapeStages(metrics_port));
      v1::MatmulResponse resp;
      const Clock::time_point t0 = Clock::now();
      if (grpc::Status s = ctl.Matmul(req, &resp); !s.ok()) {
        return absl::UnavailableError(absl::StrCat("wire Matmul ", p.ToString(), " on ", transport,
                                                   ": ", s.error_message()));
      }
      const double seconds = Since(t0);
      if (i == 0) {
        RETURN_IF_ERROR(CheckReply(ctl, req.problem(), {req.a(), req.b()}, resp.c(),
                                   resp.candidate(),
                                   absl::StrCat("wire Matmul ", p.ToString(), " on ", transport)));
        continue;
      }
      StageTotals after;
      for (int poll = 0; poll < 500; ++poll) {  // up to 5 s for the call's last stages
        ASSIGN_OR_RETURN(after, ScrapeStages(metrics_port));
        if (StageDelta(before, after, "receive").second >= 1 &&
            StageDelta(before, after, "send").second >= 1) {
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a bench's poll, not a test's
      }
      double daemon = 0;
      for (size_t j = 0; j < std::size(kStages); ++j) {
        const double seconds_in = StageDelta(before, after, kStages[j]).first;
        stages[j].push_back(seconds_in);
        daemon += seconds_in;
      }
      e2e.push_back(seconds);
      rest.push_back(std::max(0.0, seconds - daemon));
    }
    auto min = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    const double receive = Summarize(stages[0]).median;
    std::vector<std::string> row = {transport, absl::StrCat(mib), absl::StrCat(e2e.size()),
                                    Sci(min(e2e)), Sci(Summarize(e2e).median), Sci(min(stages[0])),
                                    Fixed(receive > 0 ? message / receive / 1e9 : -1, 2)};
    for (const std::vector<double>& stage : stages) row.push_back(Sci(Summarize(stage).median));
    row.push_back(Sci(Summarize(rest).median));
    table->Add(row);
    if (o.verbose) {
      std::cerr << "service " << transport << " wire " << mib << " MiB: receive "
                << Fixed(receive * 1e3, 1) << " ms (median)\n";
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServiceTables> RunService(BenchDevice& dev, const ServiceOptions& o) {
  ServiceTables out;
  out.rpc = RpcTable();
  // The daemon's stages are means over the timed calls; client_and_wire_s is
  // the rest of the median end to end: the client's serialize and parse, and
  // the bytes in flight both ways.
  std::vector<std::string> stage_columns;
  for (const char* stage : kStages) stage_columns.push_back(absl::StrCat(stage, "_s"));
  auto columns = [&](std::vector<std::string> head, std::vector<std::string> tail) {
    head.insert(head.end(), stage_columns.begin(), stage_columns.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  out.matmul = Table(columns({"transport", "path", "dtype", "n", "candidate", "e2e_s", "inprocess_s",
                              "e2e_vs_inprocess", "daemon_device_s"},
                             {"client_and_wire_s"}));
  // The same stages for the blocking client's timed calls, then what a client
  // that polls for its reply instead of sleeping sees: its end to end and
  // empty-RPC p50, the ratio to its own target, and its empty RPC after the
  // daemon sat idle for the kernel's time (the wake-ups an RPC pays then).
  out.zero_copy = Table(columns({"transport", "path", "dtype", "n", "candidate", "e2e_s",
                                 "daemon_device_s", "empty_rpc_p50_s", "target_s", "e2e_vs_target"},
                                {"client_and_wire_s", "polling_e2e_s", "polling_empty_rpc_p50_s",
                                 "polling_e2e_vs_target", "polling_idle_empty_rpc_s",
                                 "event_e2e_s", "event_e2e_vs_target"}));
  // receive_gb_per_s: the request's bytes over the median receive stage; then
  // each stage's median, and the rest of the median end to end.
  out.wire = Table(columns({"transport", "request_mib", "calls", "e2e_min_s", "e2e_median_s",
                            "receive_min_s", "receive_gb_per_s"},
                           {"client_and_wire_s"}));
  const Problem select_problem{o.dtype, 256, 256, 256};
  struct Transport {
    std::string name, listen, target;
  };
  const std::string sock = absl::StrCat("unix:", o.scratch, "/arbiterd.sock");
  const std::vector<Transport> transports = {{"tcp", "127.0.0.1:0", ""}, {"unix", sock, sock}};
  for (Transport t : transports) {
    // TCP: port 0, so the daemon picks a free one and writes it to its port file.
    const std::string port_file =
        t.name == "tcp" ? absl::StrCat(o.scratch, "/arbiterd-tcp.port") : "";
    if (!port_file.empty()) std::remove(port_file.c_str());
    ASSIGN_OR_RETURN(const int metrics_port, FreePort());
    ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon,
                     Daemon::Start(o, t.listen, port_file, metrics_port,
                                   absl::StrCat(o.scratch, "/arbiterd-", t.name, ".log")));
    if (!port_file.empty()) {
      ASSIGN_OR_RETURN(int port, WaitForPort(port_file, *daemon));
      t.target = absl::StrCat("127.0.0.1:", port);
    }
    client::ArbiterClient ctl(Options(t.target));
    if (grpc::Status s = ctl.WaitUntilServing(30); !s.ok() || !daemon->Running()) {
      return absl::UnavailableError(absl::StrCat("arbiterd on ", t.listen, " did not serve: ",
                                                 s.error_message(), " (log in ", o.scratch, ")"));
    }
    // Measure Select's bucket once, so every timed Select is a verdict hit.
    {
      v1::SelectRequest req;
      *req.mutable_problem() = WireProblem(select_problem);
      v1::SelectResponse resp;
      if (grpc::Status s = ctl.Select(req, &resp); !s.ok()) {
        return absl::UnavailableError(absl::StrCat("warm-up Select: ", s.error_message()));
      }
    }
    {
      const RpcLoadOptions load{.concurrency = o.concurrency,
                                .seconds = o.seconds_per_point,
                                .rounds = o.rpc_rounds,
                                .verbose = o.verbose};
      RETURN_IF_ERROR(AddRpcRows(t.name, t.target, select_problem, load,
                                 [&daemon] { return daemon->CpuSeconds(); }, &out.rpc));
    }
    // Matmul end to end, bytes path, against the same work in-process.
    struct Operands {
      Problem p;
      std::vector<uint8_t> a, b;
    };
    std::vector<Operands> zero_copy_sizes;  // the same operands, for the zero-copy rows
    for (int64_t n : o.matmul_sizes) {
      const Problem p{o.dtype, n, n, n};
      std::vector<uint8_t> a(p.a_bytes()), b(p.b_bytes());
      FillRandom(p.dtype, a.data(), p.m * p.k, 1);
      FillRandom(p.dtype, b.data(), p.k * p.n, 2);
      const v1::MatmulRequest req = BytesRequest(p, a, b);
      v1::MatmulResponse resp;
      std::vector<double> e2e, device;
      StageTotals before;
      for (int i = 0; i <= o.matmul_repeats; ++i) {  // the first measures the bucket
        if (i == 1) {
          ASSIGN_OR_RETURN(before, ScrapeStages(metrics_port));
        }
        const Clock::time_point t0 = Clock::now();
        if (grpc::Status s = ctl.Matmul(req, &resp); !s.ok()) {
          return absl::UnavailableError(absl::StrCat("Matmul ", p.ToString(), ": ", s.error_message()));
        }
        if (i > 0) {
          e2e.push_back(Since(t0));
          device.push_back(resp.device_seconds());
        }
      }
      ASSIGN_OR_RETURN(const StageTotals after, ScrapeStages(metrics_port));
      RETURN_IF_ERROR(CheckReply(ctl, req.problem(), {req.a(), req.b()}, resp.c(),
                                 resp.candidate(),
                                 absl::StrCat("Matmul ", p.ToString(), " on ", t.name)));
      ASSIGN_OR_RETURN(double local, InProcess(dev, p, resp.candidate(), a, b, o.matmul_repeats));
      const double e = Summarize(e2e).median;
      std::vector<std::string> row = {t.name, "bytes", DTypeName(p.dtype), absl::StrCat(n),
                                      resp.candidate(), Sci(e), Sci(local), Fixed(e / local, 3),
                                      Sci(Summarize(device).median)};
      double daemon = 0;
      for (const char* stage : kStages) {
        // Each stage's mean is over the calls it recorded: a call's send is
        // recorded when gRPC is done with it, which may be after the reply arrived.
        const auto [seconds, calls] = StageDelta(before, after, stage);
        if (calls <= 0) {
          row.push_back("");
          continue;
        }
        const double mean = seconds / calls;
        daemon += mean;
        row.push_back(Sci(mean));
      }
      row.push_back(Sci(std::max(0.0, e - daemon)));
      out.matmul.Add(row);
      if (o.verbose) std::cerr << "service " << t.name << " matmul " << p << ": " << Fixed(e / local, 2) << "x\n";
      if (o.zero_copy && t.name == "unix") {
        zero_copy_sizes.push_back({p, std::move(a), std::move(b)});
      }
    }
    RETURN_IF_ERROR(WireRows(ctl, metrics_port, t.name, o, &out.wire));
    // Zero-copy: operands in a region of the daemon's memory, on the Unix socket.
    if (o.zero_copy && t.name == "unix") {
      v1::ServerInfoResponse info;
      if (grpc::Status s = ctl.ServerInfo(&info); !s.ok()) {
        return absl::UnavailableError(absl::StrCat("ServerInfo: ", s.error_message()));
      }
      if (grpc::Status s = ctl.OpenSession(); !s.ok()) {
        return absl::UnavailableError(absl::StrCat("OpenSession: ", s.error_message()));
      }
      ASSIGN_OR_RETURN(const double empty_p50, EmptyRpcP50(ctl, 200));
      PollingClient polling(t.target, ctl.session()->token());
      std::vector<double> polled_empty;
      for (int i = 0; i < 200; ++i) {
        const Clock::time_point t0 = Clock::now();
        if (grpc::Status s = polling.Health(); !s.ok()) {
          return absl::UnavailableError(absl::StrCat("empty RPC (polling client): ", s.error_message()));
        }
        polled_empty.push_back(Since(t0));
      }
      const double polling_empty_p50 = Quantile(polled_empty, 0.5);
      // Completion by event where the daemon has events to share (a GPU's).
      std::unique_ptr<client::CompletionEvents> events;
      if (grpc::Status s = client::CompletionEvents::Open(ctl, info.uuid(), &events); !s.ok()) {
        if (s.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
          return absl::UnavailableError(absl::StrCat("completion events: ", s.error_message()));
        }
        if (o.verbose) std::cerr << "service zero-copy: no event columns: " << s.error_message() << "\n";
        events.reset();
      }
      for (const auto& [p, a, b] : zero_copy_sizes) {
        ASSIGN_OR_RETURN(const ZeroCopyRun run,
                         ZeroCopyMatmul(ctl, polling, events.get(), metrics_port, info, p, a, b,
                                        o.matmul_repeats));
        const double target = run.device_s + 2 * empty_p50;
        const double polling_target = run.device_s + 2 * polling_empty_p50;
        std::vector<std::string> row = {t.name, absl::StrCat("zero-copy ", run.kind),
                                        DTypeName(p.dtype), absl::StrCat(p.n), run.candidate,
                                        Sci(run.e2e_s), Sci(run.device_s), Sci(empty_p50),
                                        Sci(target), Fixed(run.e2e_s / target, 3)};
        double daemon = 0;
        for (double stage : run.stages) {
          row.push_back(stage < 0 ? "" : Sci(stage));
          daemon += std::max(0.0, stage);
        }
        row.push_back(Sci(std::max(0.0, run.e2e_s - daemon)));
        row.push_back(Sci(run.polling_e2e_s));
        row.push_back(Sci(polling_empty_p50));
        row.push_back(Fixed(run.polling_e2e_s / polling_target, 3));
        row.push_back(Sci(run.polling_idle_empty_s));
        row.push_back(run.event_e2e_s < 0 ? "" : Sci(run.event_e2e_s));
        row.push_back(run.event_e2e_s < 0 ? "" : Fixed(run.event_e2e_s / target, 3));
        out.zero_copy.Add(row);
        if (o.verbose) {
          std::cerr << "service " << t.name << " zero-copy matmul " << p << ": "
                    << Fixed(run.e2e_s / target, 2) << "x the target ("
                    << Fixed(run.polling_e2e_s / polling_target, 2) << "x from a polling client"
                    << (run.event_e2e_s < 0
                            ? ""
                            : absl::StrCat(", ", Fixed(run.event_e2e_s / target, 2),
                                           "x with completion EVENT"))
                    << ")\n";
        }
      }
    }
  }
  return out;
}

}  // namespace arbiter::bench
