#include "bench/src/rpc_load.h"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "arbiter/v1/arbiter.pb.h"
#include "bench/src/sections.h"
#include "client/arbiter_client.h"

namespace arbiter::bench {
namespace {

constexpr const char* kEmpty = "health (empty)";
constexpr const char* kSelect = "select";

// One load: `clients` threads, each with its own channel (as separate client
// processes would have), calling one RPC back to back for `seconds`.
struct LoadRun {
  std::vector<double> latencies;  // seconds, every call
  double calls_per_s = 0;
  double daemon_cpu_s = 0;        // the daemon's CPU time across the load
};

absl::StatusOr<LoadRun> Load(const std::string& target, bool select, const v1::SelectRequest& req,
                             int clients, double seconds,
                             const std::function<double()>& daemon_cpu_seconds) {
  std::vector<std::unique_ptr<client::ArbiterClient>> stubs;
  for (int i = 0; i < clients; ++i) {
    client::ClientOptions o;
    o.server = target;
    o.own_connection = true;
    stubs.push_back(std::make_unique<client::ArbiterClient>(o));
  }
  std::vector<std::vector<double>> per(clients);
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  const double cpu0 = daemon_cpu_seconds();
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      while (!stop.load(std::memory_order_relaxed)) {
        const Clock::time_point c0 = Clock::now();
        grpc::Status s;
        if (select) {
          v1::SelectResponse resp;
          s = stubs[i]->Select(req, &resp);
        } else {
          client::HealthStatus h;
          s = stubs[i]->Health("", &h);
        }
        per[i].push_back(Since(c0));
        if (!s.ok()) errors.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the load's duration
  stop = true;
  for (auto& t : threads) t.join();
  LoadRun run;
  const double elapsed = Since(t0);
  run.daemon_cpu_s = daemon_cpu_seconds() - cpu0;
  if (errors.load() > 0) {
    return absl::UnavailableError(absl::StrCat(select ? kSelect : kEmpty, " on ", target, ": ",
                                               errors.load(), " calls failed"));
  }
  for (auto& v : per) run.latencies.insert(run.latencies.end(), v.begin(), v.end());
  run.calls_per_s = run.latencies.size() / elapsed;
  return run;
}

// Every round of one RPC at one concurrency, pooled.
struct Pooled {
  std::vector<double> latencies, rates;
  double daemon_cpu_s = 0;
  void Add(LoadRun run) {
    latencies.insert(latencies.end(), run.latencies.begin(), run.latencies.end());
    rates.push_back(run.calls_per_s);
    daemon_cpu_s += run.daemon_cpu_s;
  }
};

double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

std::vector<std::string> Row(const std::string& transport, const char* rpc, int clients,
                             const Pooled& p, const std::vector<double>& ratios) {
  const auto [lo, hi] = std::minmax_element(p.rates.begin(), p.rates.end());
  const auto [rlo, rhi] = std::minmax_element(ratios.begin(), ratios.end());
  const bool has_ratio = !ratios.empty();
  return {transport,
          rpc,
          absl::StrCat(clients),
          absl::StrCat(p.rates.size()),
          absl::StrCat(p.latencies.size()),
          Fixed(Median(p.rates), 0),
          Fixed(*lo, 0),
          Fixed(*hi, 0),
          Fixed(Quantile(p.latencies, 0.5) * 1e6, 1),
          Fixed(Quantile(p.latencies, 0.99) * 1e6, 1),
          Fixed(p.daemon_cpu_s / p.latencies.size() * 1e6, 1),
          has_ratio ? Fixed(Median(ratios), 3) : "",
          has_ratio ? Fixed(*rlo, 3) : "",
          has_ratio ? Fixed(*rhi, 3) : ""};
}

}  // namespace

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

Table RpcTable() {
  return Table({"transport", "rpc", "concurrency", "rounds", "calls", "calls_per_s",
                "calls_per_s_min", "calls_per_s_max", "p50_us", "p99_us",
                "daemon_cpu_us_per_call", "vs_empty_throughput", "vs_empty_min", "vs_empty_max"});
}

absl::Status AddRpcRows(const std::string& transport, const std::string& target,
                        const Problem& problem, const RpcLoadOptions& options,
                        const std::function<double()>& daemon_cpu_seconds, Table* out) {
  v1::SelectRequest select;
  v1::Problem* wire = select.mutable_problem();
  wire->set_dtype(static_cast<v1::DType>(static_cast<int>(problem.dtype)));
  wire->set_m(problem.m);
  wire->set_n(problem.n);
  wire->set_k(problem.k);
  for (int clients : options.concurrency) {
    Pooled empty, sel;
    std::vector<double> ratios;
    for (int round = 0; round < options.rounds; ++round) {
      double rate[2] = {0, 0};  // empty, select
      for (int i = 0; i < 2; ++i) {
        const bool is_select = (i == 1) != (round % 2 == 1);  // odd rounds: select first
        ASSIGN_OR_RETURN(LoadRun run, Load(target, is_select, select, clients, options.seconds,
                                           daemon_cpu_seconds));
        rate[is_select] = run.calls_per_s;
        (is_select ? sel : empty).Add(std::move(run));
      }
      ratios.push_back(rate[1] / rate[0]);
    }
    out->Add(Row(transport, kEmpty, clients, empty, {}));
    out->Add(Row(transport, kSelect, clients, sel, ratios));
    if (options.verbose) {
      std::cerr << "service " << transport << " x" << clients << ": empty "
                << Fixed(Median(empty.rates), 0) << " calls/s, select " << Fixed(Median(sel.rates), 0)
                << " (" << Fixed(Median(ratios), 3) << "x)\n";
    }
  }
  return absl::OkStatus();
}

std::vector<RpcSummary> SummarizeRpc(const Table& table, const std::string& clients) {
  std::vector<RpcSummary> out;
  const std::vector<std::vector<std::string>>& rows = table.rows();
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    const auto& e = rows[i];
    const auto& s = rows[i + 1];
    if (e[1] != kEmpty || s[1] != kSelect || s[2] != clients || e[0] != s[0]) continue;
    out.push_back({s[0], clients, absl::StrCat(s[11], " (", s[12], "-", s[13], ")"),
                   absl::StrCat(s[9], " vs ", e[9])});
  }
  return out;
}

}  // namespace arbiter::bench
