// The service section's zero-copy rows (issue 9's target): on the Unix socket,
// Matmul on A, B and C in one region of the daemon's memory (as `arbiterctl
// matmul --operands device` does) against the kernel's device time plus twice
// the empty RPC's p50 there, each result checked against the reference first.
// Beside the blocking client's calls, the same calls from a client that polls
// for its reply instead of sleeping, and with completion EVENT where the daemon
// shares events (a GPU's).
// Thread-compatible: the rows are driven from the calling thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/src/table.h"
#include "client/arbiter_client.h"
#include "engine/problem.h"
#include "engine/status.h"

namespace arbiter::bench {

// One size's problem and operands (the bytes-path rows' own, so both see the same).
struct ZeroCopyOperands {
  Problem p;
  std::vector<uint8_t> a, b;
};

// The table AddZeroCopyRows fills.
Table ZeroCopyTable();

// A row per size on `ctl` (a client of `target`, the daemon whose /metrics is
// on 127.0.0.1:`metrics_port`), each of `repeats` timed calls; opens `ctl`'s
// session for the regions. `transport` names the rows.
absl::Status AddZeroCopyRows(client::ArbiterClient& ctl, const std::string& transport,
                             const std::string& target, int metrics_port,
                             const std::vector<ZeroCopyOperands>& sizes, int repeats,
                             bool verbose, Table* table);

}  // namespace arbiter::bench
