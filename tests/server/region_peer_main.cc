// A second client process for the region tests: its own process, so its own
// SO_PEERCRED credentials and its own session.
//
//   region_peer SERVER use REGION_ID
//       names another peer's region as A, B and C of a 1x1x1 f32 Matmul, then
//       tries to unregister it; prints the two status codes ("5 5" for
//       NOT_FOUND twice) and exits 0 when both are refusals.
//   region_peer SERVER hold BYTES
//       registers a memfd region of BYTES, prints its id, and waits on stdin
//       (the test kills it to show a dead process's regions are released).
//   region_peer SERVER matmul M N
//       one f32 Matmul M x N x 1 with inline operands (C is M*N*4 bytes back in
//       the reply: host staging off);
//       prints its status code when it returns (the test stops this process
//       while the reply is on its way, to show shutdown does not wait for it).
#include <unistd.h>

#include <iostream>
#include <string>

#include "client/arbiter_client.h"
#include "client/shared_memory.h"

int main(int argc, char** argv) {
  using namespace arbiter;
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: region_peer SERVER use REGION_ID | hold BYTES | matmul M N\n";
    return 2;
  }
  client::ClientOptions options;
  options.server = argv[1];
  options.deadline_seconds = 30;
  options.host_staging = false;  // every byte through the socket, as the tests expect
  client::ArbiterClient client(options);
  if (grpc::Status s = client.OpenSession(); !s.ok()) {
    std::cerr << "session: " << s.error_message() << "\n";
    return 3;
  }
  const std::string mode = argv[2];
  if (mode == "use") {
    v1::MatmulRequest request;
    request.mutable_problem()->set_dtype(v1::DTYPE_F32);
    request.mutable_problem()->set_m(1);
    request.mutable_problem()->set_n(1);
    request.mutable_problem()->set_k(1);
    request.mutable_a_ref()->set_region(argv[3]);
    request.mutable_b_ref()->set_region(argv[3]);
    request.mutable_b_ref()->set_offset(256);
    request.mutable_c_ref()->set_region(argv[3]);
    request.mutable_c_ref()->set_offset(512);
    v1::MatmulResponse response;
    const grpc::Status used = client.Matmul(request, &response);
    const grpc::Status released = client.UnregisterRegion(argv[3]);
    std::cout << used.error_code() << " " << released.error_code() << std::endl;
    return !used.ok() && !released.ok() ? 0 : 1;
  }
  if (mode == "matmul" && argc == 5) {
    const int64_t m = std::stol(argv[3]), n = std::stol(argv[4]);
    v1::MatmulRequest request;
    request.mutable_problem()->set_dtype(v1::DTYPE_F32);
    request.mutable_problem()->set_m(m);
    request.mutable_problem()->set_n(n);
    request.mutable_problem()->set_k(1);
    request.set_a(std::string(static_cast<size_t>(m) * 4, '\0'));
    request.set_b(std::string(static_cast<size_t>(n) * 4, '\0'));
    v1::MatmulResponse response;
    std::cout << client.Matmul(request, &response).error_code() << std::endl;
    return 0;
  }
  if (mode == "hold") {
    std::unique_ptr<client::SharedMemory> memory;
    const size_t bytes = std::stoul(argv[3]);
    if (!client::SharedMemory::Create(bytes, "region_peer", &memory).ok()) return 4;
    v1::Region region;
    if (grpc::Status s = client.RegisterFd(memory->fd(), v1::REGION_KIND_HOST_MEMFD,
                                           static_cast<int64_t>(bytes), "held", &region);
        !s.ok()) {
      std::cerr << "register: " << s.error_message() << "\n";
      return 5;
    }
    std::cout << region.id() << std::endl;
    std::string line;
    std::getline(std::cin, line);  // until the test kills this process
    return 0;
  }
  return 2;
}
