// The service section: arbiterd started by the bench (one daemon per transport:
// loopback TCP, then a Unix socket), driven by a C++ load generator - a thread
// and a channel per client - and compared in the same run with
//   - an empty RPC (grpc.health.v1 Check) for Select's latency and throughput,
//     interleaved in rounds (rpc_load.h);
//   - the same work in-process (copy in, the kernel the daemon served, copy out)
//     for Matmul end to end on the bytes path, with the daemon's own per-stage
//     breakdown of those calls (the deltas of its arbiter_dispatch_stage_seconds
//     histogram, scraped from its /metrics before and after them);
//   - on the Unix socket, Matmul on zero-copy operands (A, B and C in one region
//     of the daemon's device memory, as `arbiterctl matmul --operands device`
//     does) against the kernel's device time plus twice the empty RPC's p50
//     there (issue 9's target), each result checked against the reference first;
//   - the wire alone: Matmuls whose kernel is next to nothing (f32 1 x 1 x K, A
//     and B each half of a 16-256 MiB request, C one element), each call's
//     daemon stages read from the histogram around it: the receive stage's rate
//     is what the bytes path can move, whatever the device.
#pragma once

#include <string>
#include <vector>

#include "bench/src/bench_device.h"
#include "bench/src/table.h"

namespace arbiter::bench {

struct ServiceOptions {
  std::string arbiterd;                       // the daemon binary to start
  std::string backend = "cpu";                // its --backend
  std::string scratch;                        // folder for the socket and daemon logs
  std::vector<int> concurrency = {1, 4, 16};  // clients in flight
  double seconds_per_point = 1.0;             // each (transport, rpc, concurrency, round) runs this long
  int rpc_rounds = 3;                         // rounds of Select against the empty RPC (rpc_load.h)
  DType dtype = DType::kF32;                  // Select's and Matmul's problems
  std::vector<int64_t> matmul_sizes = {256, 512, 1024};  // n of n^3
  int matmul_repeats = 5;                     // each path, median of this many calls
  bool zero_copy = false;                     // the zero-copy rows (regions on the unix socket)
  int64_t staging_min_bytes = 1 << 20;        // the staged rows' client: its host_staging_min_bytes
  std::vector<int64_t> wire_mib = {16, 64, 256};  // request sizes of the wire rows; empty: none
  std::vector<std::string> daemon_flags;     // more flags for each arbiterd started, e.g. --launch_graphs=0
  bool verbose = true;
};

struct ServiceTables {
  Table rpc{std::vector<std::string>{}};     // RpcTable(): transport, rpc, concurrency: calls/s, p50, p99
  Table matmul{std::vector<std::string>{}};  // size: end to end and in-process, daemon stages
  Table zero_copy{std::vector<std::string>{}};  // size: end to end against kernel + 2 empty RPCs
  Table wire{std::vector<std::string>{}};       // request size: the bytes path's receive and send
};

absl::StatusOr<ServiceTables> RunService(BenchDevice& dev, const ServiceOptions& options);

}  // namespace arbiter::bench
