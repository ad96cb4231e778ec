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

// One size's problem and operands (the bytes-path rows' own, so both see the
// same), and the same work in-process (copy in, kernel, copy out) there.
struct ZeroCopyOperands {
  Problem p;
  std::vector<uint8_t> a, b;
  double inprocess_s = 0;
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

// Rows of the Matmul table (its columns: the bytes path's) for host shared
// memory on `ctl`'s daemon (a sealed memfd region, which a GPU daemon copies
// over the bus): per size, `repeats` timed calls with A and B already in the
// region and C read there ("host region"), then the same calls with the
// client's copies of A and B into the region and of C out of it counted in
// ("host region + client copies"), each against the size's in-process time.
// Opens `ctl`'s session; checks C against the reference first.
absl::Status AddHostRegionRows(client::ArbiterClient& ctl, const std::string& transport,
                               int metrics_port, const std::vector<ZeroCopyOperands>& sizes,
                               int repeats, bool verbose, Table* matmul);

}  // namespace arbiter::bench
