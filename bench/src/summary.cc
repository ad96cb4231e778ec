#include "bench/src/summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/src/rpc_load.h"

namespace arbiter::bench {

double GeoMean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / v.size());
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Max(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, x);
  return m;
}

std::vector<double> Column(const Table& t, const std::string& name) {
  std::vector<double> out;
  const size_t i = t.Index(name);
  if (i == t.columns().size()) return out;
  for (const auto& r : t.rows()) {
    double v;
    if (absl::SimpleAtod(r[i], &v) && v > 0) out.push_back(v);
  }
  return out;
}

std::string OverRegret(const Table& t, double bound) {
  const size_t regret = t.Index("regret");
  std::string out;
  for (const auto& r : t.rows()) {
    double v;
    if (!absl::SimpleAtod(r[regret], &v) || v <= bound) continue;
    absl::StrAppend(&out, "- ", r[t.Index("dtype")], " ", r[t.Index("m")], "x", r[t.Index("n")],
                    "x", r[t.Index("k")], ": served ", r[t.Index("served")], " (regret ", r[regret],
                    ", paired ", r[t.Index("regret_paired")], ", best ", r[t.Index("best")], "): ",
                    r[t.Index("served_reason")], "\n");
  }
  if (out.empty()) return out;
  return absl::StrCat("Rows over ", Fixed(bound, 2), "x the best, and why they were served "
                      "(selection.csv: `served_reason`, `served_race`):\n\n", out, "\n");
}

void AddKernelsSummary(const Table& kernels, const std::string& vendor_name, Table* summary) {
  std::vector<double> best_vs_vendor, best_vs_floor;
  std::map<std::string, std::pair<double, double>> best;  // shape -> (t, vs_floor)
  std::map<std::string, double> vendor;
  int agree = 0, compared = 0;
  for (const auto& r : kernels.rows()) {
    const std::string shape = absl::StrCat(r[kernels.Index("m")], "x", r[kernels.Index("n")], "x",
                                           r[kernels.Index("k")]);
    double t, f;
    if (!absl::SimpleAtod(r[kernels.Index("median_s")], &t)) continue;
    if (!absl::SimpleAtod(r[kernels.Index("vs_floor")], &f)) f = 0;
    if (!best.count(shape) || t < best[shape].first) best[shape] = {t, f};
    if (r[kernels.Index("candidate")] == vendor_name) vendor[shape] = t;
    if (const std::string& agrees = r[kernels.Index("run2_agrees")]; !agrees.empty()) {
      ++compared;
      agree += agrees == "yes";
    }
  }
  for (const auto& [shape, bf] : best) {
    if (vendor.count(shape)) best_vs_vendor.push_back(bf.first / vendor[shape]);
    if (bf.second > 0) best_vs_floor.push_back(bf.second);
  }
  summary->Add({"kernels: shapes measured", absl::StrCat(best.size())});
  summary->Add({absl::StrCat("kernels: best / ", vendor_name, " (geomean)"),
                Fixed(GeoMean(best_vs_vendor), 3)});
  summary->Add({"kernels: best / floor (geomean)", Fixed(GeoMean(best_vs_floor), 2)});
  summary->Add({"kernels: second run within spread", absl::StrCat(agree, " of ", compared)});
}

void AddSelectionSummary(const Table& selection, const std::string& vendor_name,
                         Table* summary) {
  const std::vector<double> regret = Column(selection, "regret");
  const std::vector<double> vendor = Column(selection, "vendor_vs_best");
  const std::vector<double> tier = Column(selection, "tier_vs_best");
  summary->Add({"selection: shapes", absl::StrCat(selection.rows().size())});
  summary->Add({"selection: served / best (geomean, worst)",
                absl::StrCat(Fixed(GeoMean(regret), 3), ", ", Fixed(Max(regret), 3))});
  summary->Add({absl::StrCat("selection: ", vendor_name, " alone / best (geomean, worst)"),
                absl::StrCat(Fixed(GeoMean(vendor), 3), ", ", Fixed(Max(vendor), 3))});
  summary->Add({"selection: tier default / best (geomean, worst)",
                absl::StrCat(Fixed(GeoMean(tier), 3), ", ", Fixed(Max(tier), 3))});
}

void AddTransferSummary(const Table& transfer, Table* summary) {
  const std::vector<double> before = Column(transfer, "regret_before");
  const std::vector<double> after = Column(transfer, "regret_after");
  const int within = static_cast<int>(
      std::count_if(after.begin(), after.end(), [](double r) { return r <= 1.03; }));
  // Round by round: a miss beyond the noise is one whose lower bound is over 1.03.
  const std::vector<double> paired = Column(transfer, "regret_after_paired");
  const std::vector<double> low = Column(transfer, "regret_after_low");
  const int misses =
      static_cast<int>(std::count_if(low.begin(), low.end(), [](double r) { return r > 1.03; }));
  // Refinement cost per shape, at dims <= 4096 (the goal) and overall.
  std::vector<double> device_small, wall_small, device_all;
  const size_t device_col = transfer.Index("refine_device_s"),
               wall_col = transfer.Index("refine_wall_s"), dim_col = transfer.Index("max_dim");
  for (const auto& r : transfer.rows()) {
    double device, wall, max_dim;
    if (!absl::SimpleAtod(r[device_col], &device) || !absl::SimpleAtod(r[wall_col], &wall) ||
        !absl::SimpleAtod(r[dim_col], &max_dim)) {
      continue;
    }
    device_all.push_back(device * 1e3);
    if (max_dim <= 4096) {
      device_small.push_back(device * 1e3);
      wall_small.push_back(wall * 1e3);
    }
  }
  auto median_worst = [](const std::vector<double>& v, int digits) {
    return absl::StrCat(Fixed(Median(v), digits), ", ", Fixed(Max(v), digits));
  };
  auto geomean_worst = [](const std::vector<double>& v) {
    return absl::StrCat(Fixed(GeoMean(v), 3), ", ", Fixed(Max(v), 3));
  };
  summary->Add({"transfer: shapes served from a bucket measured elsewhere",
                absl::StrCat(transfer.rows().size())});
  summary->Add({"transfer: before refinement, served / best (geomean, worst)", geomean_worst(before)});
  summary->Add({"transfer: after refinement, served / best (geomean, worst)", geomean_worst(after)});
  summary->Add({"transfer: after refinement, shapes within 1.03 of best",
                absl::StrCat(within, " of ", after.size())});
  summary->Add({"transfer: after refinement, paired served / best (geomean, worst)",
                geomean_worst(paired)});
  summary->Add({"transfer: after refinement, misses beyond the noise (paired lower bound > 1.03)",
                absl::StrCat(misses, " of ", low.size())});
  summary->Add({"transfer: refinement device ms per shape, dims <= 4096 (median, worst)",
                median_worst(device_small, 2)});
  summary->Add({"transfer: refinement wall ms per shape, dims <= 4096 (median, worst)",
                median_worst(wall_small, 1)});
  summary->Add({"transfer: refinement device ms per shape, all (median, worst)",
                median_worst(device_all, 2)});
}

void AddServiceSummary(const ServiceTables& service, const std::string& most_clients,
                       Table* summary) {
  for (const RpcSummary& r : SummarizeRpc(service.rpc, most_clients)) {
    summary->Add({absl::StrCat("service: ", r.transport, " Select / empty RPC throughput at ",
                               r.clients, " clients (median round, lowest-highest)"),
                  r.ratio});
    summary->Add({absl::StrCat("service: ", r.transport, " Select vs empty RPC p99 us at ",
                               r.clients, " clients"),
                  r.p99_us});
  }
  for (const auto& r : service.matmul.rows()) {
    summary->Add({absl::StrCat("service: ", r[0], " Matmul ", r[1], " ", r[3],
                               "^3 end to end / in-process"),
                  r[7]});
  }
  const size_t event_ratio = service.zero_copy.Index("event_e2e_vs_target");
  for (const auto& r : service.zero_copy.rows()) {
    summary->Add({absl::StrCat("service: ", r[0], " Matmul ", r[1], " ", r[3],
                               "^3 end to end / (kernel + 2x empty RPC p50)"),
                  r[9]});
    if (event_ratio < r.size() && !r[event_ratio].empty()) {  // where the daemon has events
      summary->Add({absl::StrCat("service: ", r[0], " Matmul ", r[1], " ", r[3],
                                 "^3 completion EVENT, end to end / (kernel + 2x empty RPC p50)"),
                    r[event_ratio]});
    }
  }
  for (const auto& r : service.wire.rows()) {
    summary->Add({absl::StrCat("service: ", r[0], " wire ", r[1],
                               " MiB request, receive GB/s (median)"),
                  r[6]});
  }
}

}  // namespace arbiter::bench
