#include "bench/src/service_section.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/src/rpc_load.h"
#include "bench/src/sections.h"
#include "bench/src/service_daemon.h"
#include "bench/src/service_requests.h"
#include "bench/src/zero_copy_rows.h"
#include "client/arbiter_client.h"
#include "engine/measurer.h"

namespace arbiter::bench {
namespace {

// A client of its own connection, as a separate client process would have;
// every Matmul's bytes in its messages unless `staging` (the library's default
// on a Unix socket: client/host_staging.h).
client::ClientOptions Options(const std::string& server, bool staging = false,
                              int64_t staging_min_bytes = 0) {
  client::ClientOptions o;
  o.server = server;
  o.own_connection = true;
  o.host_staging = staging;
  if (staging) o.host_staging_min_bytes = staging_min_bytes;
  return o;
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

// The row of one size on `path`: `o.matmul_repeats` timed Matmuls of `p` on
// `a` and `b` as bytes (after one that measures the bucket), the last reply
// checked, against the same work in-process (`local`, measured here when 0),
// with the daemon's mean stages over them. Path "bytes": `ctl` sends A and B
// in the request and gets C in the reply; "staged": `ctl` stages them through
// its host buffer. Returns the in-process time.
absl::StatusOr<double> MatmulRow(BenchDevice& dev, client::ArbiterClient& ctl, int metrics_port,
                                 const std::string& transport, const std::string& path,
                                 const ServiceOptions& o, const Problem& p,
                                 const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                 double local, Table* table) {
  const int64_t staged_before = ctl.staged_calls();
  const v1::MatmulRequest req = BytesRequest(p, a, b);
  v1::MatmulResponse resp;
  // C into the caller's memory, as the in-process comparison has it (MatmulInto).
  std::string c(p.c_bytes(), '\0');
  std::vector<double> e2e, device;
  StageTotals before;
  for (int i = 0; i <= o.matmul_repeats; ++i) {  // the first measures the bucket
    if (i == 1) {
      ASSIGN_OR_RETURN(before, ScrapeStages(metrics_port));
    }
    const Clock::time_point t0 = Clock::now();
    if (grpc::Status s = ctl.MatmulInto(req, c.data(), c.size(), &resp); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("Matmul ", p.ToString(), ": ", s.error_message()));
    }
    if (i > 0) {
      e2e.push_back(Since(t0));
      device.push_back(resp.device_seconds());
    }
  }
  ASSIGN_OR_RETURN(const StageTotals after, ScrapeStages(metrics_port));
  RETURN_IF_ERROR(CheckReply(ctl, req.problem(), {req.a(), req.b()}, c, resp.candidate(),
                             absl::StrCat("Matmul ", p.ToString(), " on ", transport, " (", path, ")")));
  const int64_t staged = ctl.staged_calls() - staged_before;
  if (staged != (path == "staged" ? o.matmul_repeats + 1 : 0)) {
    return absl::InternalError(absl::StrCat("Matmul ", p.ToString(), " on ", transport, " (", path,
                                            "): ", staged, " of ", o.matmul_repeats + 1,
                                            " calls staged"));
  }
  if (local == 0) {
    ASSIGN_OR_RETURN(local, InProcess(dev, p, resp.candidate(), a, b, o.matmul_repeats));
  }
  const double e = Summarize(e2e).median;
  std::vector<std::string> row = {transport, path, DTypeName(p.dtype), absl::StrCat(p.n),
                                  resp.candidate(), Sci(e), Sci(local), Fixed(e / local, 3),
                                  Sci(Summarize(device).median)};
  const double daemon = AppendStageMeans(before, after, &row);
  row.push_back(Sci(std::max(0.0, e - daemon)));
  table->Add(row);
  if (o.verbose) {
    std::cerr << "service " << transport << " matmul " << path << " " << p << ": "
              << Fixed(e / local, 2) << "x\n";
  }
  return local;
}

// Matmul end to end against the same work in-process, a row per size of
// `o.matmul_sizes`: the bytes path, and where `staging` is given (the Unix
// socket) the same requests staged by it. Returns the operands if the
// zero-copy rows follow (on the Unix socket, if asked), so they see the same.
absl::StatusOr<std::vector<ZeroCopyOperands>> MatmulRows(BenchDevice& dev,
                                                         client::ArbiterClient& ctl,
                                                         client::ArbiterClient* staging,
                                                         int metrics_port,
                                                         const std::string& transport,
                                                         const ServiceOptions& o, Table* table) {
  std::vector<ZeroCopyOperands> sizes;
  for (int64_t n : o.matmul_sizes) {
    const Problem p{o.dtype, n, n, n};
    std::vector<uint8_t> a(p.a_bytes()), b(p.b_bytes());
    FillRandom(p.dtype, a.data(), p.m * p.k, 1);
    FillRandom(p.dtype, b.data(), p.k * p.n, 2);
    ASSIGN_OR_RETURN(const double local,
                     MatmulRow(dev, ctl, metrics_port, transport, "bytes", o, p, a, b, 0, table));
    if (staging != nullptr &&
        static_cast<int64_t>(p.a_bytes() + p.b_bytes() + p.c_bytes()) >=
            staging->options().host_staging_min_bytes) {
      RETURN_IF_ERROR(
          MatmulRow(dev, *staging, metrics_port, transport, "staged", o, p, a, b, local, table)
              .status());
    }
    if (o.zero_copy && transport == "unix") sizes.push_back({p, std::move(a), std::move(b), local});
  }
  return sizes;
}

// The service's tables, with their columns and no rows.
ServiceTables EmptyTables() {
  ServiceTables out;
  out.rpc = RpcTable();
  // The daemon's stages are means over the timed calls; client_and_wire_s is
  // the rest of the median end to end: the client's serialize and parse, and
  // the bytes in flight both ways.
  out.matmul = Table(WithStageColumns({"transport", "path", "dtype", "n", "candidate", "e2e_s",
                                       "inprocess_s", "e2e_vs_inprocess", "daemon_device_s"},
                                      {"client_and_wire_s"}));
  out.zero_copy = ZeroCopyTable();
  // receive_gb_per_s: the request's bytes over the median receive stage; then
  // each stage's median, and the rest of the median end to end.
  out.wire = Table(WithStageColumns({"transport", "request_mib", "calls", "e2e_min_s",
                                     "e2e_median_s", "receive_min_s", "receive_gb_per_s"},
                                    {"client_and_wire_s"}));
  return out;
}

struct Transport {
  std::string name;    // names the rows: "tcp" or "unix"
  std::string listen;  // the daemon's --listen
  std::string target;  // the clients' server; "" for TCP, whose port the daemon picks
};

// A daemon serving on `t`, and the target its clients dial.
struct Served {
  std::unique_ptr<Daemon> daemon;
  std::string target;
  int metrics_port = 0;
};

// Starts arbiterd on `t`; on TCP on port 0, so the daemon picks a free one,
// and waits for the port it writes to its port file.
absl::StatusOr<Served> StartDaemon(const ServiceOptions& o, const Transport& t) {
  const std::string port_file =
      t.name == "tcp" ? absl::StrCat(o.scratch, "/arbiterd-tcp.port") : "";
  if (!port_file.empty()) std::remove(port_file.c_str());
  Served served;
  served.target = t.target;
  ASSIGN_OR_RETURN(served.metrics_port, FreePort());
  ASSIGN_OR_RETURN(served.daemon,
                   Daemon::Start(o.arbiterd, o.backend, t.listen, port_file, served.metrics_port,
                                 absl::StrCat(o.scratch, "/arbiterd-", t.name, ".log"),
                                 o.daemon_flags));
  if (!port_file.empty()) {
    ASSIGN_OR_RETURN(int port, WaitForPort(port_file, *served.daemon));
    served.target = absl::StrCat("127.0.0.1:", port);
  }
  return served;
}

// Measures Select's bucket once, so every timed Select is a verdict hit.
absl::Status WarmSelect(client::ArbiterClient& ctl, const Problem& problem) {
  v1::SelectRequest req;
  *req.mutable_problem() = WireProblem(problem);
  v1::SelectResponse resp;
  if (grpc::Status s = ctl.Select(req, &resp); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("warm-up Select: ", s.error_message()));
  }
  return absl::OkStatus();
}

// Every row of one transport, on a daemon of its own: Select against the empty
// RPC, Matmul on the bytes path, the wire alone, then (on the Unix socket, if
// asked) zero-copy and host shared memory.
absl::Status RunTransport(BenchDevice& dev, const ServiceOptions& o, const Transport& t,
                          ServiceTables* out) {
  ASSIGN_OR_RETURN(const Served served, StartDaemon(o, t));
  client::ArbiterClient ctl(Options(served.target));
  if (grpc::Status s = ctl.WaitUntilServing(30); !s.ok() || !served.daemon->Running()) {
    return absl::UnavailableError(absl::StrCat("arbiterd on ", t.listen, " did not serve: ",
                                               s.error_message(), " (log in ", o.scratch, ")"));
  }
  const Problem select_problem{o.dtype, 256, 256, 256};
  RETURN_IF_ERROR(WarmSelect(ctl, select_problem));
  const RpcLoadOptions load{.concurrency = o.concurrency,
                            .seconds = o.seconds_per_point,
                            .rounds = o.rpc_rounds,
                            .verbose = o.verbose};
  const Daemon& daemon = *served.daemon;
  RETURN_IF_ERROR(AddRpcRows(t.name, served.target, select_problem, load,
                             [&daemon] { return daemon.CpuSeconds(); }, &out->rpc));
  // On the Unix socket, the client library as it comes: bytes-path Matmuls staged.
  std::unique_ptr<client::ArbiterClient> staging;
  if (t.name == "unix") {
    staging = std::make_unique<client::ArbiterClient>(Options(served.target, true, o.staging_min_bytes));
  }
  ASSIGN_OR_RETURN(const std::vector<ZeroCopyOperands> sizes,
                   MatmulRows(dev, ctl, staging.get(), served.metrics_port, t.name, o, &out->matmul));
  RETURN_IF_ERROR(WireRows(ctl, served.metrics_port, t.name, o, &out->wire));
  if (!o.zero_copy || t.name != "unix") return absl::OkStatus();
  RETURN_IF_ERROR(AddZeroCopyRows(ctl, t.name, served.target, served.metrics_port, sizes,
                                  o.matmul_repeats, o.verbose, &out->zero_copy));
  return AddHostRegionRows(ctl, t.name, served.metrics_port, sizes, o.matmul_repeats, o.verbose,
                           &out->matmul);
}

}  // namespace

absl::StatusOr<ServiceTables> RunService(BenchDevice& dev, const ServiceOptions& o) {
  ServiceTables out = EmptyTables();
  const std::string sock = absl::StrCat("unix:", o.scratch, "/arbiterd.sock");
  for (const Transport& t : {Transport{"tcp", "127.0.0.1:0", ""}, Transport{"unix", sock, sock}}) {
    RETURN_IF_ERROR(RunTransport(dev, o, t, &out));
  }
  return out;
}

}  // namespace arbiter::bench
