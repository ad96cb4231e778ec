#include "bench/src/zero_copy_rows.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>
#include <utility>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "bench/src/rpc_load.h"
#include "bench/src/sections.h"
#include "bench/src/service_daemon.h"
#include "bench/src/service_requests.h"
#include "client/completion_events.h"
#include "client/device_operands.h"
#include "client/matmul_check.h"
#include "client/session.h"
#include "client/shared_memory.h"
#include "engine/measurer.h"

namespace arbiter::bench {
namespace {

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
  // The blocking client's empty RPC p50, one call after each timed Matmul: the
  // target's denominator, taken under the same conditions as the calls it judges
  // (measured apart, minutes earlier, it read 73-316 us from run to run).
  double empty_p50_s = 0;
  // The daemon's stages of the timed (blocking) calls, in kStages' order: the
  // mean of each over the calls that recorded it; -1 where none did.
  std::vector<double> stages;
  // The same calls with completion EVENT, each timed until the client's wait on
  // its event (cudaEventSynchronize) returned; -1 where the daemon has no events.
  double event_e2e_s = -1;
  // Of the timed (blocking) calls, the share whose launch the daemon replayed
  // (arbiter_dispatch_launches_total); -1 where no launch was recorded.
  double replayed_share = -1;
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

// ZeroCopyRun::polling_idle_empty_s: the PollingClient's empty RPC p50 over
// 50 calls, each after the client spun for `device_s` (the kernel's time).
absl::StatusOr<double> IdleEmptyP50(PollingClient& polling, double device_s) {
  std::vector<double> idle_empty;
  for (int i = 0; i < 50; ++i) {
    const Clock::time_point idle = Clock::now();
    while (Since(idle) < device_s) {
    }  // spinning, as the polling client does during a Matmul
    const Clock::time_point t0 = Clock::now();
    if (grpc::Status s = polling.Health(); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("empty RPC (polling client): ", s.error_message()));
    }
    idle_empty.push_back(Since(t0));
  }
  return Quantile(idle_empty, 0.5);
}

// The daemon's stage totals once the send stage has recorded `calls` more
// calls than in `before`: gRPC records a call's send once it is done with it,
// which may be just after its reply arrived (polled up to 5 s).
absl::StatusOr<StageTotals> StagesAfter(int metrics_port, const StageTotals& before, int calls) {
  StageTotals after;
  for (int poll = 0; poll < 500; ++poll) {
    ASSIGN_OR_RETURN(after, ScrapeStages(metrics_port));
    if (StageDelta(before, after, "send").second >= calls) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a bench's poll, not a test's
  }
  return after;
}

// A, B and C of `p` in one region of `kind` (DeviceOperands::Create) that
// `ctl`'s open session registered, at offsets aligned for every candidate, and
// `req`'s refs naming them; the operands are the caller's to write.
struct RegionOperands {
  std::unique_ptr<client::DeviceOperands> memory;
  std::string region;
  size_t a_at = 0, b_at = 0, c_at = 0;
};

absl::StatusOr<RegionOperands> PlaceInRegion(client::ArbiterClient& ctl,
                                             const v1::ServerInfoResponse& info,
                                             const std::string& kind, const std::string& label,
                                             const Problem& p, v1::MatmulRequest* req) {
  RegionOperands r;
  r.b_at = client::AlignUp(p.a_bytes());
  r.c_at = r.b_at + client::AlignUp(p.b_bytes());
  if (grpc::Status s = client::DeviceOperands::Create(info, kind, r.c_at + p.c_bytes(), &r.memory);
      !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(label, " operands: ", s.error_message()));
  }
  v1::Region region;
  if (grpc::Status s = r.memory->Register(ctl, label, &region); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("register region: ", s.error_message()));
  }
  r.region = region.id();
  for (auto [ref, at] : {std::pair{req->mutable_a_ref(), r.a_at}, {req->mutable_b_ref(), r.b_at},
                         {req->mutable_c_ref(), r.c_at}}) {
    ref->set_region(r.region);
    ref->set_offset(static_cast<int64_t>(at));
  }
  return r;
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
  ASSIGN_OR_RETURN(const RegionOperands placed,
                   PlaceInRegion(ctl, info, "auto", "arbiter-bench zero-copy", p, &req));
  client::DeviceOperands* const memory = placed.memory.get();
  const size_t c_at = placed.c_at;
  if (grpc::Status s = memory->Write(placed.a_at, ops.a); !s.ok()) {
    return absl::InternalError(s.error_message());
  }
  if (grpc::Status s = memory->Write(placed.b_at, ops.b); !s.ok()) {
    return absl::InternalError(s.error_message());
  }
  ZeroCopyRun run;
  run.kind = memory->kind_name();
  absl::Status status = absl::OkStatus();
  std::vector<double> e2e, device, polled, empties;
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
    const Clock::time_point empty_start = Clock::now();
    client::HealthStatus health;
    if (grpc::Status s = ctl.Health("", &health); !s.ok()) {
      status = absl::UnavailableError(absl::StrCat("empty RPC: ", s.error_message()));
      break;
    }
    empties.push_back(Since(empty_start));
  }
  if (status.ok()) {
    absl::StatusOr<StageTotals> scraped = StagesAfter(metrics_port, before, repeats);
    if (scraped.ok()) after = *std::move(scraped);
    status = scraped.status();
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
  ctl.UnregisterRegion(placed.region);  // the session's end would release it too
  RETURN_IF_ERROR(status);
  run.e2e_s = Summarize(e2e).median;
  run.device_s = Summarize(device).median;
  run.empty_p50_s = Summarize(empties).median;
  run.polling_e2e_s = Summarize(polled).median;
  ASSIGN_OR_RETURN(run.polling_idle_empty_s, IdleEmptyP50(polling, run.device_s));
  for (const char* stage : kStages) {
    const auto [seconds, calls] = StageDelta(before, after, stage);
    run.stages.push_back(calls > 0 ? seconds / calls : -1);
  }
  if (const double launches = StageDelta(before, after, "launch").second; launches > 0) {
    run.replayed_share = StageDelta(before, after, "replayed").second / launches;
  }
  return run;
}

// The empty RPC's p50 from the PollingClient, over `calls` in a row.
absl::StatusOr<double> PollingEmptyP50(PollingClient& polling, int calls) {
  std::vector<double> polled_empty;
  for (int i = 0; i < calls; ++i) {
    const Clock::time_point t0 = Clock::now();
    if (grpc::Status s = polling.Health(); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("empty RPC (polling client): ", s.error_message()));
    }
    polled_empty.push_back(Since(t0));
  }
  return Quantile(polled_empty, 0.5);
}

// Completion by event where the daemon has events to share (a GPU's); null
// where it has none (FAILED_PRECONDITION: the rows go without event columns).
absl::StatusOr<std::unique_ptr<client::CompletionEvents>> OpenEvents(
    client::ArbiterClient& ctl, const v1::ServerInfoResponse& info, bool verbose) {
  std::unique_ptr<client::CompletionEvents> events;
  if (grpc::Status s = client::CompletionEvents::Open(ctl, info.uuid(), &events); !s.ok()) {
    if (s.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
      return absl::UnavailableError(absl::StrCat("completion events: ", s.error_message()));
    }
    if (verbose) std::cerr << "service zero-copy: no event columns: " << s.error_message() << "\n";
    events.reset();
  }
  return events;
}

// One size's row: the blocking client's end to end against its target, the
// daemon's stages, then the polling client's and the events' columns.
std::vector<std::string> ZeroCopyRow(const std::string& transport, const Problem& p,
                                     const ZeroCopyRun& run, double empty_p50,
                                     double polling_empty_p50) {
  const double target = run.device_s + 2 * empty_p50;
  const double polling_target = run.device_s + 2 * polling_empty_p50;
  std::vector<std::string> row = {transport, absl::StrCat("zero-copy ", run.kind),
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
  row.push_back(run.replayed_share < 0 ? "" : Fixed(run.replayed_share, 2));
  return row;
}

void PrintZeroCopy(const std::string& transport, const Problem& p, const ZeroCopyRun& run,
                   double empty_p50, double polling_empty_p50) {
  const double target = run.device_s + 2 * empty_p50;
  const double polling_target = run.device_s + 2 * polling_empty_p50;
  std::cerr << "service " << transport << " zero-copy matmul " << p << ": "
            << Fixed(run.e2e_s / target, 2) << "x the target ("
            << Fixed(run.polling_e2e_s / polling_target, 2) << "x from a polling client"
            << (run.event_e2e_s < 0
                    ? ""
                    : absl::StrCat(", ", Fixed(run.event_e2e_s / target, 2),
                                   "x with completion EVENT"))
            << ")\n";
}

// One "host region" row: `repeats` timed Matmuls of `req` (refs into `placed`),
// the client's copies of A and B in and of C out inside each timed call when
// `copies` is set. The daemon's stages are means over the timed calls.
absl::StatusOr<std::vector<std::string>> HostRegionRow(
    client::ArbiterClient& ctl, const std::string& transport, int metrics_port,
    const ZeroCopyOperands& size, const RegionOperands& placed, const v1::MatmulRequest& req,
    const client::Operands& ops, bool copies, int repeats) {
  client::DeviceOperands& memory = *placed.memory;
  const size_t a_at = placed.a_at, b_at = placed.b_at, c_at = placed.c_at;
  const Problem& p = size.p;
  std::vector<double> e2e, device;
  std::string c;
  ASSIGN_OR_RETURN(const StageTotals before, ScrapeStages(metrics_port));
  std::string candidate;
  for (int i = 0; i < repeats; ++i) {
    v1::MatmulResponse resp;
    const Clock::time_point t0 = Clock::now();
    if (copies && (!memory.Write(a_at, ops.a).ok() || !memory.Write(b_at, ops.b).ok())) {
      return absl::InternalError("writing A and B into the host region");
    }
    if (grpc::Status s = ctl.Matmul(req, &resp); !s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("host-region Matmul ", p.ToString(), ": ", s.error_message()));
    }
    if (copies && !memory.Read(c_at, p.c_bytes(), &c).ok()) {
      return absl::InternalError("reading C from the host region");
    }
    e2e.push_back(Since(t0));
    device.push_back(resp.device_seconds());
    candidate = resp.candidate();
  }
  ASSIGN_OR_RETURN(const StageTotals after, StagesAfter(metrics_port, before, repeats));
  const double e = Summarize(e2e).median;
  std::vector<std::string> row = {transport,
                                  copies ? "host region + client copies" : "host region",
                                  DTypeName(p.dtype),
                                  absl::StrCat(p.n),
                                  candidate,
                                  Sci(e),
                                  Sci(size.inprocess_s),
                                  Fixed(e / size.inprocess_s, 3),
                                  Sci(Summarize(device).median)};
  const double daemon = AppendStageMeans(before, after, &row);
  row.push_back(Sci(std::max(0.0, e - daemon)));
  return row;
}

}  // namespace

absl::Status AddHostRegionRows(client::ArbiterClient& ctl, const std::string& transport,
                               int metrics_port, const std::vector<ZeroCopyOperands>& sizes,
                               int repeats, bool verbose, Table* matmul) {
  v1::ServerInfoResponse info;
  if (grpc::Status s = ctl.ServerInfo(&info); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("ServerInfo: ", s.error_message()));
  }
  if (grpc::Status s = ctl.OpenSession(); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("OpenSession: ", s.error_message()));
  }
  for (const ZeroCopyOperands& size : sizes) {
    const Problem& p = size.p;
    v1::MatmulRequest req;
    *req.mutable_problem() = WireProblem(p);
    const client::Operands ops{std::string(size.a.begin(), size.a.end()),
                               std::string(size.b.begin(), size.b.end())};
    ASSIGN_OR_RETURN(const RegionOperands placed,
                     PlaceInRegion(ctl, info, "memfd", "arbiter-bench host region", p, &req));
    client::DeviceOperands* const memory = placed.memory.get();
    const size_t a_at = placed.a_at, b_at = placed.b_at, c_at = placed.c_at;
    // Checked first, on C poisoned before it; not timed.
    absl::Status status = absl::OkStatus();
    if (!memory->Write(a_at, ops.a).ok() || !memory->Write(b_at, ops.b).ok() ||
        !memory->Write(c_at, std::string(p.c_bytes(), '\xff')).ok()) {
      status = absl::InternalError("writing the host region");
    }
    v1::MatmulResponse resp;
    if (status.ok()) {
      if (grpc::Status s = ctl.Matmul(req, &resp); !s.ok()) {
        status = absl::UnavailableError(
            absl::StrCat("host-region Matmul ", p.ToString(), ": ", s.error_message()));
      }
    }
    std::string c;
    if (status.ok() && !memory->Read(c_at, p.c_bytes(), &c).ok()) {
      status = absl::InternalError("reading C from the host region");
    }
    if (status.ok()) {
      status = CheckReply(ctl, req.problem(), ops, c, resp.candidate(),
                          absl::StrCat("host-region Matmul ", p.ToString()));
    }
    for (bool copies : {false, true}) {
      if (!status.ok()) break;
      absl::StatusOr<std::vector<std::string>> row =
          HostRegionRow(ctl, transport, metrics_port, size, placed, req, ops, copies, repeats);
      if (!row.ok()) {
        status = row.status();
        break;
      }
      if (verbose) {
        std::cerr << "service " << transport << " host-region matmul " << p
                  << (copies ? " (+ client copies)" : "") << ": " << (*row)[7] << "x in-process\n";
      }
      matmul->Add(*std::move(row));
    }
    ctl.UnregisterRegion(placed.region);  // the session's end would release it too
    RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

// The same stages as the bytes-path rows for the blocking client's timed calls,
// then what a client that polls for its reply instead of sleeping sees: its end
// to end and empty-RPC p50, the ratio to its own target, and its empty RPC after
// the daemon sat idle for the kernel's time (the wake-ups an RPC pays then).
Table ZeroCopyTable() {
  return Table(WithStageColumns({"transport", "path", "dtype", "n", "candidate", "e2e_s",
                                 "daemon_device_s", "empty_rpc_p50_s", "target_s", "e2e_vs_target"},
                                {"client_and_wire_s", "polling_e2e_s", "polling_empty_rpc_p50_s",
                                 "polling_e2e_vs_target", "polling_idle_empty_rpc_s",
                                 "event_e2e_s", "event_e2e_vs_target", "replayed_share"}));
}

absl::Status AddZeroCopyRows(client::ArbiterClient& ctl, const std::string& transport,
                             const std::string& target, int metrics_port,
                             const std::vector<ZeroCopyOperands>& sizes, int repeats,
                             bool verbose, Table* table) {
  v1::ServerInfoResponse info;
  if (grpc::Status s = ctl.ServerInfo(&info); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("ServerInfo: ", s.error_message()));
  }
  if (grpc::Status s = ctl.OpenSession(); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("OpenSession: ", s.error_message()));
  }
  RETURN_IF_ERROR(EmptyRpcP50(ctl, 200).status());  // the connection and the daemon's threads warm
  PollingClient polling(target, ctl.session()->token());
  ASSIGN_OR_RETURN(const double polling_empty_p50, PollingEmptyP50(polling, 200));
  ASSIGN_OR_RETURN(const std::unique_ptr<client::CompletionEvents> events,
                   OpenEvents(ctl, info, verbose));
  for (const ZeroCopyOperands& size : sizes) {
    ASSIGN_OR_RETURN(const ZeroCopyRun run,
                     ZeroCopyMatmul(ctl, polling, events.get(), metrics_port, info, size.p, size.a,
                                    size.b, repeats));
    table->Add(ZeroCopyRow(transport, size.p, run, run.empty_p50_s, polling_empty_p50));
    if (verbose) PrintZeroCopy(transport, size.p, run, run.empty_p50_s, polling_empty_p50);
  }
  return absl::OkStatus();
}

}  // namespace arbiter::bench
