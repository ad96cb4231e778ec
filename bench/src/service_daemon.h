// The arbiterd the service section starts, and what the bench reads from it:
// the process (started with the bench's flags, stopped when it goes), a free
// loopback port for it, the port it wrote once serving, and its per-stage
// dispatch times (arbiter_dispatch_stage_seconds, server/metrics.h) scraped
// from its /metrics.
// Thread-compatible: a Daemon is driven by one thread; CpuSeconds may be read
// from others (it only reads /proc).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/status.h"

namespace arbiter::bench {

// An arbiterd this bench started; stopped (SIGTERM, then waited for) when it goes.
class Daemon {
 public:
  // `arbiterd` with --backend=`backend` on `listen`, its metrics on
  // 127.0.0.1:`metrics_port`, its stdout and stderr into `log`; it writes its
  // port to `port_file` if that is not empty. `flags` go on its command line last.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const std::string& arbiterd,
                                                       const std::string& backend,
                                                       const std::string& listen,
                                                       const std::string& port_file,
                                                       int metrics_port, const std::string& log,
                                                       const std::vector<std::string>& flags = {});
  ~Daemon();
  Daemon(const Daemon&) = delete;  // one owner stops the process
  Daemon& operator=(const Daemon&) = delete;

  bool Running() const;
  // Its user + system CPU time so far (/proc/<pid>/stat, fields 14 and 15); 0 if unreadable.
  double CpuSeconds() const;

 private:
  explicit Daemon(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

// The port arbiterd wrote once serving; polls the file (the daemon's only signal) for 30 s.
absl::StatusOr<int> WaitForPort(const std::string& path, const Daemon& daemon);

// A loopback TCP port free now (bound, then released for the daemon to bind).
absl::StatusOr<int> FreePort();

// The daemon's arbiter_dispatch_stage_seconds: stage -> (sum, count); and
// "replayed" -> (n, n), arbiter_dispatch_launches_total{how="replayed"}.
using StageTotals = std::map<std::string, std::pair<double, double>>;

// Scrapes http://127.0.0.1:port/metrics (the endpoint answers and closes).
absl::StatusOr<StageTotals> ScrapeStages(int port);

// One stage's seconds between two scrapes, and how many calls it recorded.
std::pair<double, double> StageDelta(const StageTotals& before, const StageTotals& after,
                                     const std::string& stage);

// The stages' order in the tables, as the daemon names them (server/metrics.h).
inline constexpr const char* kStages[] = {"receive", "prepare", "lease", "h2d",
                                          "launch",  "kernel",  "d2h",   "send"};

// Appends to `row` each stage's mean between two scrapes, in kStages' order (a
// stage's mean is over the calls it recorded: a call's send is recorded when
// gRPC is done with it, which may be after its reply arrived; "" where none
// did), and returns their sum.
double AppendStageMeans(const StageTotals& before, const StageTotals& after,
                        std::vector<std::string>* row);

// A table's columns: `head`, then one per stage ("<stage>_s"), then `tail`.
std::vector<std::string> WithStageColumns(std::vector<std::string> head,
                                          const std::vector<std::string>& tail);

}  // namespace arbiter::bench
