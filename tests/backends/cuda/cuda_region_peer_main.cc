// A client process for the GPU region tests: GPU memory on the daemon's
// device, shared by `kind` (vmm: cuMemCreate + a POSIX fd over the session;
// ipc: cudaMalloc + cudaIpcGetMemHandle).
//
//   cuda_region_peer SERVER hold KIND BYTES
//       registers BYTES, prints the region id, and waits on stdin (the test
//       kills it: a dead client's regions must be released).
//   cuda_region_peer SERVER oob KIND
//       registers a region for a 64x64x64 f16 problem, poisons C, sends Matmuls
//       whose refs are out of bounds, misaligned or overlapping, and checks each
//       is refused with INVALID_ARGUMENT and that C was not touched (nothing
//       ran); then a correct one, checked against the reference. Exit 0 when all hold.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "client/arbiter_client.h"
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: cuda_region_peer SERVER hold KIND BYTES | oob KIND\n";
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
  const size_t bytes = mode == "hold" && argc > 4 ? std::stoul(argv[4]) : 3 * client::AlignUp(64 * 64 * 2);
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
  return 2;
}
