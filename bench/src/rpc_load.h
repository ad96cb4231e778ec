// Select against the empty RPC (grpc.health.v1 Check), from the same clients:
// issue 9's "Select throughput >= 0.8x the empty RPC's", p99 reported.
//
// Each concurrency is run in rounds, the two RPCs back to back in each and
// their order alternating (health then select, then select then health), so
// that whatever else loads the machine lands on both alike; a round's ratio is
// its select rate over its health rate, and the row gives the median round and
// the lowest and highest. Latency quantiles pool every call of every round.
// The daemon's CPU time per call (its user + system time across the load, from
// /proc) is the figure least moved by other load on a small shared machine.
//
// Not thread-safe: one table filled by one caller.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/src/table.h"
#include "engine/problem.h"
#include "engine/status.h"

namespace arbiter::bench {

struct RpcLoadOptions {
  std::vector<int> concurrency = {1, 4, 16};  // clients in flight (a thread and a channel each)
  double seconds = 1.0;                       // one load: one rpc, one concurrency, one round
  int rounds = 3;                             // loads of each rpc per concurrency
  bool verbose = true;                        // a progress line per concurrency on stderr
};

// The q-quantile (0..1) of `v`, nearest rank; -1 for none.
double Quantile(std::vector<double> v, double q);

// The table AddRpcRows fills.
Table RpcTable();

// Rows of `transport` (a name for the table) served at `target`: for each
// concurrency, one for the empty RPC and one for Select of `select`, whose
// bucket the daemon holds a verdict of (every call a hit). `daemon_cpu_seconds`
// reads the serving daemon's CPU time so far. Fails when any call fails.
absl::Status AddRpcRows(const std::string& transport, const std::string& target,
                        const Problem& select, const RpcLoadOptions& options,
                        const std::function<double()>& daemon_cpu_seconds, Table* out);

// The rows of `table` that a summary quotes: select's at `clients` per transport.
struct RpcSummary {
  std::string transport, clients;
  std::string ratio;       // "0.912 (0.880-0.951)": median round (lowest-highest)
  std::string p99_us;      // "583 vs 226": select's p99 vs the empty RPC's
};
std::vector<RpcSummary> SummarizeRpc(const Table& table, const std::string& clients);

}  // namespace arbiter::bench
