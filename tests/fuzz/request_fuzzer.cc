// libFuzzer target: arbitrary bytes as any request the daemon serves, through
// the services' own handlers - the validation and conversion from protobuf
// (server/convert.*) they apply, and whatever runs after a request passes it.
//
// The first byte picks the request type; the rest is parsed as that message
// (bytes that do not parse are what gRPC refuses before any handler) - except
// a Matmul's, which go as they are, in many slices, to the raw handler the
// wire uses (server/wire_matmul_request.h), and are checked against protobuf's
// reading of them. The
// handlers run over a real engine on the CPU backend with the CPU candidates,
// limits small enough that any valid problem is cheap, tuning off unless a
// request asks, and an in-memory store reset after each input so that every
// input is judged alone. Admin runs without an AdminAuth (every call allowed),
// so the handlers behind it are reached. Tune is streamed (its handler needs a
// live call): its problems go through the same ProblemFromProto it applies.
//
// What counts as a finding: a crash, a sanitizer report (ASan, UBSan), or a
// handler answering OK to a request the engine's own checks reject.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "arbiter/v1/arbiter.pb.h"
#include "backends/cpu/cpu_backend.h"
#include "engine/arbiter.h"
#include "engine/registry.h"
#include "engine/verdict_store.h"
#include "kernels/registry/cpu_candidates.h"
#include "server/admin_service.h"
#include "server/convert.h"
#include "server/dispatch_service.h"

namespace arbiter {
namespace {

struct Services {
  std::unique_ptr<Arbiter> arbiter;
  std::unique_ptr<server::DispatchService> dispatch;
  std::unique_ptr<server::AdminService> admin;
};

std::unique_ptr<Services> Start() {
  auto cpu = CpuBackend::Create(CpuBackendOptions{.threads = 1});
  if (!cpu.ok()) std::abort();
  auto registry = Registry::Create(CpuCandidates(1), **cpu);
  auto store = VerdictStore::Open(":memory:");
  if (!registry.ok() || !store.ok()) std::abort();
  ArbiterOptions options;
  options.tuning = TuningPolicy::kOff;
  options.limits.max_operand_bytes = 48 * 48 * 8;  // small enough that any input runs fast
  options.measure.min_samples = 1;  // one quick sample: inputs must run fast
  options.measure.max_samples = 2;
  options.measure.device_budget_seconds = 0.001;
  options.measure.wall_budget_seconds = 0.01;
  options.measure.cold_cache = false;
  options.verify_fraction = 0.5;
  auto arbiter = Arbiter::Create(options, *std::move(cpu), *std::move(registry), *std::move(store));
  if (!arbiter.ok()) std::abort();
  auto s = std::make_unique<Services>();
  s->arbiter = *std::move(arbiter);
  s->dispatch = std::make_unique<server::DispatchService>(*s->arbiter);
  s->admin = std::make_unique<server::AdminService>(
      *s->arbiter, server::ServerIdentity{.version = "fuzz", .store_path = ":memory:", .fd_socket = ""}, nullptr);
  return s;
}

// Parses `data` as M and hands it to `handle`; bytes that do not parse reach no handler.
template <typename M, typename Handle>
void Parsed(const uint8_t* data, size_t size, Handle handle) {
  M request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  handle(request);
}

// Each input starts from the same state: no verdicts, forces or quarantine
// entries. Verdicts and quarantine are cleared in place; a force (rare: a valid
// Force request) costs a fresh engine.
void Reset(std::unique_ptr<Services>& s) {
  s->arbiter->WaitIdle();
  (void)s->arbiter->Invalidate(InvalidateScope{.candidate = {}, .dtype = {}, .bucket = {}, .all = true});
  (void)s->arbiter->ClearQuarantine("");
  if (auto forces = s->arbiter->ListForces(); !forces.ok() || !forces->empty()) {
    s.reset();
    s = Start();
  }
}

}  // namespace
}  // namespace arbiter

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arbiter;
  static std::unique_ptr<Services> services = [] {
    spdlog::set_level(spdlog::level::off);  // refusals are logged; millions of lines say nothing
    return Start();
  }();
  if (size == 0) return 0;
  Services& s = *services;
  grpc::ServerContext context;
  const uint8_t which = data[0];
  ++data;
  --size;
  switch (which % 12) {
    case 0: {
      // The wire's Matmul: the bytes as they would arrive, in slices of 1-16
      // bytes (the input's first byte says), through the raw parser. Bytes
      // protobuf parses must get the typed handler's answer; bytes it refuses
      // must be refused.
      std::vector<grpc::Slice> slices;
      const size_t piece = 1 + (which / 12) % 16;
      for (size_t at = 0; at < size; at += piece) {
        slices.emplace_back(data + at, std::min(piece, size - at));
      }
      grpc::ByteBuffer bytes(slices.data(), slices.size());
      grpc::ByteBuffer reply;
      const grpc::Status wire = s.dispatch->MatmulBytes(&context, bytes, &reply);
      v1::MatmulRequest r;
      const bool parses = r.ParseFromArray(data, static_cast<int>(size));
      if (!parses) {
        if (wire.ok()) std::abort();  // answered bytes that are no MatmulRequest
        break;
      }
      v1::MatmulResponse typed_response;
      const grpc::Status typed = s.dispatch->Matmul(&context, &r, &typed_response);
      if (typed.error_code() != wire.error_code()) std::abort();
      if (!wire.ok()) break;
      // Answered: the engine's own checks accept the problem, and C has its size.
      std::vector<grpc::Slice> out;
      std::string reply_bytes;
      if (!reply.Dump(&out).ok()) std::abort();
      for (const grpc::Slice& slice : out) {
        reply_bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      }
      v1::MatmulResponse response;
      const absl::StatusOr<Problem> p =
          server::ProblemFromProto(r.problem(), s.arbiter->options().limits);
      if (!response.ParseFromString(reply_bytes) || !p.ok() || response.c().size() != p->c_bytes() ||
          typed_response.c().size() != p->c_bytes()) {
        std::abort();
      }
      break;
    }
    case 1:
      Parsed<v1::SelectRequest>(data, size, [&](const v1::SelectRequest& r) {
        v1::SelectResponse response;
        (void)s.dispatch->Select(&context, &r, &response);
      });
      break;
    case 2:
      Parsed<v1::ForceRequest>(data, size, [&](const v1::ForceRequest& r) {
        v1::ForceResponse response;
        (void)s.admin->Force(&context, &r, &response);
      });
      break;
    case 3:
      Parsed<v1::UnforceRequest>(data, size, [&](const v1::UnforceRequest& r) {
        v1::UnforceResponse response;
        (void)s.admin->Unforce(&context, &r, &response);
      });
      break;
    case 4:
      Parsed<v1::InvalidateRequest>(data, size, [&](const v1::InvalidateRequest& r) {
        v1::InvalidateResponse response;
        (void)s.admin->Invalidate(&context, &r, &response);
      });
      break;
    case 5:
      Parsed<v1::QuarantineRequest>(data, size, [&](const v1::QuarantineRequest& r) {
        v1::QuarantineResponse response;
        (void)s.admin->Quarantine(&context, &r, &response);
      });
      break;
    case 6:
      Parsed<v1::ClearQuarantineRequest>(data, size, [&](const v1::ClearQuarantineRequest& r) {
        v1::ClearQuarantineResponse response;
        (void)s.admin->ClearQuarantine(&context, &r, &response);
      });
      break;
    case 7:
      Parsed<v1::ListVerdictsRequest>(data, size, [&](const v1::ListVerdictsRequest& r) {
        v1::ListVerdictsResponse response;
        (void)s.admin->ListVerdicts(&context, &r, &response);
      });
      break;
    case 8:
      Parsed<v1::ListQuarantineRequest>(data, size, [&](const v1::ListQuarantineRequest& r) {
        v1::ListQuarantineResponse response;
        (void)s.admin->ListQuarantine(&context, &r, &response);
      });
      break;
    case 9:
      Parsed<v1::ListCandidatesRequest>(data, size, [&](const v1::ListCandidatesRequest& r) {
        v1::ListCandidatesResponse response;
        (void)s.admin->ListCandidates(&context, &r, &response);
      });
      break;
    case 10:
      Parsed<v1::ServerInfoRequest>(data, size, [&](const v1::ServerInfoRequest& r) {
        v1::ServerInfoResponse response;
        (void)s.admin->ServerInfo(&context, &r, &response);
      });
      break;
    case 11:
      Parsed<v1::TuneRequest>(data, size, [&](const v1::TuneRequest& r) {
        for (const v1::Problem& p : r.problems()) {
          (void)server::ProblemFromProto(p, s.arbiter->options().limits);
        }
      });
      break;
  }
  Reset(services);
  return 0;
}
