// A client process for the GPU region tests: GPU memory on the daemon's
// device, shared by `kind` (vmm: cuMemCreate + a POSIX fd over the session;
// ipc: cudaMalloc + cudaIpcGetMemHandle), or host memory (memfd: a sealed
// memfd the daemon page-locks; not for `event`, which needs C on the GPU).
//
//   cuda_region_peer SERVER hold KIND BYTES
//       registers BYTES, prints the region id, and waits on stdin (the test
//       kills it: a dead client's regions must be released).
//   cuda_region_peer SERVER oob KIND
//       registers a region for a 64x64x64 f16 problem, poisons C, sends Matmuls
//       whose refs are out of bounds, misaligned or overlapping, and checks each
//       is refused with INVALID_ARGUMENT and that C was not touched (nothing
//       ran); then a correct one, checked against the reference. Exit 0 when all hold.
//   cuda_region_peer SERVER event KIND
//       completion EVENT: ragged bf16 Matmuls on poisoned C, each checked in
//       full against the reference once the event the reply names is waited on
//       (on the host, then on a stream of this process); then that a slot is not
//       recorded again before it is acknowledged: every slot handed out once
//       with none acknowledged, the next call RESOURCE_EXHAUSTED, and the slot
//       acknowledged next the one handed out. Exit 0 when all hold.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <cuda_runtime_api.h>

#include <vector>

#include "client/arbiter_client.h"
#include "client/completion_events.h"
#include "client/device_operands.h"
#include "client/matmul_check.h"
#include "client/shared_memory.h"

namespace {

using namespace arbiter;

int Fail(const std::string& why) {
  std::cout << "FAIL " << why << std::endl;
  return 1;
}

int Oob(client::ArbiterClient& client, client::DeviceOperands& memory, const std::string& id) {
  v1::MatmulRequest request;
  request.mutable_problem()->set_dtype(v1::DTYPE_F16);
  request.mutable_problem()->set_m(64);
  request.mutable_problem()->set_n(64);
  request.mutable_problem()->set_k(64);
  const client::Operands ops = client::RandomOperands(request.problem(), 11);
  const size_t bytes = 64 * 64 * 2, a_at = 0, b_at = client::AlignUp(bytes), c_at = 2 * b_at;
  const std::string poison(bytes, '\xff');  // f16 NaN everywhere
  if (!memory.Write(a_at, ops.a).ok() || !memory.Write(b_at, ops.b).ok() ||
      !memory.Write(c_at, poison).ok()) {
    return Fail("writing the operands");
  }
  auto refs = [&](size_t a, size_t b, size_t c) {
    v1::MatmulRequest r = request;
    r.mutable_a_ref()->set_region(id);
    r.mutable_a_ref()->set_offset(static_cast<int64_t>(a));
    r.mutable_b_ref()->set_region(id);
    r.mutable_b_ref()->set_offset(static_cast<int64_t>(b));
    r.mutable_c_ref()->set_region(id);
    r.mutable_c_ref()->set_offset(static_cast<int64_t>(c));
    return r;
  };
  struct Bad {
    const char* what;
    v1::MatmulRequest request;
  } bad[] = {{"C past the end", refs(a_at, b_at, c_at + 256)},
             {"A misaligned", refs(a_at + 2, b_at, c_at)},
             {"C overlapping B", refs(a_at, b_at, b_at)}};
  for (const Bad& b : bad) {
    v1::MatmulResponse response;
    const grpc::Status s = client.Matmul(b.request, &response);
    std::cout << b.what << ": " << s.error_code() << " " << s.error_message() << std::endl;
    if (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT) return Fail(std::string(b.what) + " was not refused");
  }
  std::string c;
  if (!memory.Read(c_at, bytes, &c).ok()) return Fail("reading C");
  if (c != poison) return Fail("C changed although every request was refused before launch");
  v1::MatmulResponse response;
  const grpc::Status s = client.Matmul(refs(a_at, b_at, c_at), &response);
  if (!s.ok()) return Fail("the correct request: " + s.error_message());
  if (!memory.Read(c_at, bytes, &c).ok()) return Fail("reading C");
  client::CheckOptions all;
  all.samples = 0;
  const client::CheckResult check =
      client::CheckMatmul(request.problem(), ops, c, client::DefaultBudget(v1::DTYPE_F16), all);
  if (!check.passed()) return Fail("C: " + check.first_failure);
  std::cout << "OK " << response.candidate() << std::endl;
  return 0;
}

// A ragged bf16 Matmul of `dims` on poisoned C with completion EVENT; C read
// after waiting on the reply's event - on a stream of ours when `on_stream`, else
// on the host - and checked in full.
int EventMatmul(client::ArbiterClient& client, client::DeviceOperands& memory,
                client::CompletionEvents& events, const std::string& id, const int64_t (&dims)[3],
                bool on_stream) {
  v1::MatmulRequest request;
  request.mutable_problem()->set_dtype(v1::DTYPE_BF16);
  request.mutable_problem()->set_m(dims[0]);
  request.mutable_problem()->set_n(dims[1]);
  request.mutable_problem()->set_k(dims[2]);
  const client::Operands ops = client::RandomOperands(request.problem(), 17);
  const size_t a_at = 0, b_at = client::AlignUp(ops.a.size()), c_at = b_at + client::AlignUp(ops.b.size());
  const size_t c_bytes = static_cast<size_t>(dims[0] * dims[1]) * 2;
  if (!memory.Write(a_at, ops.a).ok() || !memory.Write(b_at, ops.b).ok() ||
      !memory.Write(c_at, std::string(c_bytes, '\xff')).ok()) {  // bf16 NaN everywhere
    return Fail("writing the operands");
  }
  for (auto [ref, at] : {std::pair{request.mutable_a_ref(), a_at}, {request.mutable_b_ref(), b_at},
                         {request.mutable_c_ref(), c_at}}) {
    ref->set_region(id);
    ref->set_offset(static_cast<int64_t>(at));
  }
  events.Prepare(&request);
  v1::MatmulResponse response;
  if (grpc::Status s = client.Matmul(request, &response); !s.ok()) return Fail("event Matmul: " + s.error_message());
  if (response.completion() != v1::COMPLETION_EVENT) return Fail("the reply is not completed by event");
  cudaStream_t stream = nullptr;
  if (on_stream) {
    // A blocking stream: Read's copy on the legacy default stream waits for
    // everything enqueued on it first, the wait on the event included.
    if (cudaStreamCreate(&stream) != cudaSuccess) return Fail("cudaStreamCreate");
    if (grpc::Status s = events.StreamWait(response, stream); !s.ok()) {
      return Fail("StreamWait: " + s.error_message());
    }
  } else if (grpc::Status s = events.Synchronize(response); !s.ok()) {
    return Fail("Synchronize: " + s.error_message());
  }
  std::string c;
  const bool read = memory.Read(c_at, c_bytes, &c).ok();
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (!read) return Fail("reading C");
  client::CheckOptions all;
  all.samples = 0;
  const client::CheckResult check =
      client::CheckMatmul(request.problem(), ops, c, client::DefaultBudget(v1::DTYPE_BF16), all);
  if (!check.passed()) return Fail("C after the event: " + check.first_failure);
  std::cout << "OK event " << dims[0] << "x" << dims[1] << "x" << dims[2] << " slot "
            << response.event_slot() << " " << response.candidate() << std::endl;
  return 0;
}

// Slots handed out without acknowledgement are never handed out again; with
// none free the call is refused; an acknowledged slot is the next one given.
int SlotsWaitForTheirAck(client::ArbiterClient& client, client::CompletionEvents& events,
                         const std::string& id) {
  v1::MatmulRequest request;
  request.mutable_problem()->set_dtype(v1::DTYPE_BF16);
  request.mutable_problem()->set_m(64);
  request.mutable_problem()->set_n(64);
  request.mutable_problem()->set_k(64);
  const size_t bytes = 64 * 64 * 2;
  for (auto [ref, at] : {std::pair{request.mutable_a_ref(), size_t{0}},
                         {request.mutable_b_ref(), client::AlignUp(bytes)},
                         {request.mutable_c_ref(), 2 * client::AlignUp(bytes)}}) {
    ref->set_region(id);
    ref->set_offset(static_cast<int64_t>(at));
  }
  // The first call gives back what the earlier ones waited on; none after it does.
  events.Prepare(&request);
  std::vector<bool> seen(events.slots(), false);
  for (size_t i = 0; i < events.slots(); ++i) {
    v1::MatmulResponse response;
    if (grpc::Status s = client.Matmul(request, &response); !s.ok()) {
      return Fail("unacknowledged call " + std::to_string(i) + ": " + s.error_message());
    }
    request.clear_done_event_slots();
    const int slot = response.event_slot();
    if (slot < 0 || static_cast<size_t>(slot) >= seen.size() || seen[slot]) {
      return Fail("slot " + std::to_string(slot) + " handed out again before its acknowledgement");
    }
    seen[slot] = true;
    if (!events.Synchronize(response).ok()) return Fail("Synchronize");
  }
  v1::MatmulResponse response;
  const grpc::Status full = client.Matmul(request, &response);
  std::cout << "all slots taken: " << full.error_code() << " " << full.error_message() << std::endl;
  if (full.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
    return Fail("a call with every slot unacknowledged was not refused");
  }
  const int acked = static_cast<int>(events.slots()) / 2;
  request.add_done_event_slots(acked);
  if (grpc::Status s = client.Matmul(request, &response); !s.ok()) {
    return Fail("the call acknowledging slot " + std::to_string(acked) + ": " + s.error_message());
  }
  if (response.event_slot() != acked) {
    return Fail("slot " + std::to_string(response.event_slot()) + " handed out; only " +
                std::to_string(acked) + " was free");
  }
  std::cout << "OK slots" << std::endl;
  return events.Synchronize(response).ok() ? 0 : Fail("Synchronize");
}

int Event(client::ArbiterClient& client, client::DeviceOperands& memory,
          const v1::ServerInfoResponse& info, const std::string& id) {
  std::unique_ptr<client::CompletionEvents> events;
  if (grpc::Status s = client::CompletionEvents::Open(client, info.uuid(), &events); !s.ok()) {
    return Fail("completion events: " + s.error_message());
  }
  const int64_t host_wait[3] = {333, 517, 259}, stream_wait[3] = {129, 1000, 72};
  if (int code = EventMatmul(client, memory, *events, id, host_wait, false); code != 0) return code;
  if (int code = EventMatmul(client, memory, *events, id, stream_wait, true); code != 0) return code;
  return SlotsWaitForTheirAck(client, *events, id);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: cuda_region_peer SERVER hold KIND BYTES | oob KIND | event KIND\n";
    return 2;
  }
  client::ClientOptions options;
  options.server = argv[1];
  options.deadline_seconds = 120;
  client::ArbiterClient client(options);
  if (grpc::Status s = client.OpenSession(); !s.ok()) return Fail("session: " + s.error_message());
  v1::ServerInfoResponse info;
  if (grpc::Status s = client.ServerInfo(&info); !s.ok()) return Fail("info: " + s.error_message());
  const std::string mode = argv[2], kind = argv[3];
  const size_t bytes = mode == "hold" && argc > 4 ? std::stoul(argv[4])
                      : mode == "event"            ? size_t{4} << 20
                                                   : 3 * client::AlignUp(64 * 64 * 2);
  std::unique_ptr<client::DeviceOperands> memory;
  if (grpc::Status s = client::DeviceOperands::Create(info, kind, bytes, &memory); !s.ok()) {
    return Fail("allocating: " + s.error_message());
  }
  v1::Region region;
  if (grpc::Status s = memory->Register(client, mode, &region); !s.ok()) {
    return Fail("register: " + s.error_message());
  }
  if (mode == "hold") {
    std::cout << region.id() << std::endl;
    std::string line;
    std::getline(std::cin, line);
    return 0;
  }
  if (mode == "oob") return Oob(client, *memory, region.id());
  if (mode == "event") return Event(client, *memory, info, region.id());
  return 2;
}
