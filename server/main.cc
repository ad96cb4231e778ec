// arbiterd: parse flags, build DaemonOptions, Daemon::Create, wait for SIGTERM/SIGINT.
// Test daemons are built from this same file, linking their own TestCandidates()
// (server/test_candidates.h).
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/daemon.h"
#include "server/logging.h"
#include "server/malloc_policy.h"
#include "server/test_candidates.h"

// --tuning and --backend parse into their enums, so a bad value stops arbiterd
// before it starts, naming the flag (absl finds these by argument-dependent lookup).
namespace arbiter {
bool AbslParseFlag(absl::string_view text, TuningPolicy* policy, std::string* error) {
  const std::optional<TuningPolicy> parsed = ParseTuningPolicy({text.data(), text.size()});
  if (!parsed) {
    *error = "expected sync, async or off";
    return false;
  }
  *policy = *parsed;
  return true;
}
std::string AbslUnparseFlag(TuningPolicy policy) { return TuningPolicyName(policy); }

namespace server {
bool AbslParseFlag(absl::string_view text, BackendKind* kind, std::string* error) {
  const absl::StatusOr<BackendKind> parsed = ParseBackendKind({text.data(), text.size()});
  if (!parsed.ok()) {
    *error = "expected auto, cpu or cuda";
    return false;
  }
  *kind = *parsed;
  return true;
}
std::string AbslUnparseFlag(BackendKind kind) { return std::string(BackendKindName(kind)); }
}  // namespace server
}  // namespace arbiter

namespace {
using arbiter::TuningPolicy;
using arbiter::server::BackendKind;
using arbiter::server::DaemonOptions;

// Each flag's default is its field's in a default DaemonOptions.
const DaemonOptions& Defaults() {
  static const DaemonOptions defaults;
  return defaults;
}
}  // namespace

ABSL_FLAG(std::string, listen, Defaults().listen,
          "host:port or unix:/path to serve on, comma-separated for several; port 0 picks a free one");
ABSL_FLAG(std::string, store, Defaults().store_path,
          "verdict store: a SQLite file path, or a postgresql:// URI shared by a fleet of daemons");
ABSL_FLAG(std::string, store_password_file, Defaults().store_password_file,
          "PostgreSQL store: file whose first line is the password (else PGPASSWORD or PGPASSFILE)");
ABSL_FLAG(BackendKind, backend, Defaults().backend, "auto (cuda when a GPU is visible), cpu or cuda");
ABSL_FLAG(std::string, device, Defaults().device,
          "the GPU this daemon owns: a CUDA device ordinal (0, 1, ...) or a GPU UUID (GPU-...); "
          "empty: device 0");
ABSL_FLAG(TuningPolicy, tuning, Defaults().arbiter.tuning,
          "on a verdict miss: sync (measure, then answer), async, off");
ABSL_FLAG(int, workers, Defaults().arbiter.workers,
          "device streams for dispatch and tuning; 0: sized to the device (1 on CPU, 4 on a GPU)");
ABSL_FLAG(int64_t, max_message_bytes, Defaults().max_message_bytes,
          "largest request or response; the default fits 8192x8192 f32 operands");
ABSL_FLAG(int64_t, max_operand_bytes, Defaults().arbiter.limits.max_operand_bytes,
          "largest A, B or C of a problem, in bytes (at most 2^31); dimensions have no cap of their own");
ABSL_FLAG(int64_t, max_regions_per_peer, Defaults().arbiter.regions.max_regions_per_peer,
          "regions one client process may register (RESOURCE_EXHAUSTED past it)");
ABSL_FLAG(int64_t, max_region_bytes_per_peer, Defaults().arbiter.regions.max_bytes_per_peer,
          "bytes of regions one client process may register; 0: the device's memory");
ABSL_FLAG(int64_t, max_host_region_bytes_per_peer, Defaults().arbiter.regions.max_host_bytes_per_peer,
          "bytes of host-memory (memfd) regions one client process may register - a GPU daemon "
          "page-locks them; 0: a quarter of the host's memory");
ABSL_FLAG(int64_t, max_resident_bytes, Defaults().arbiter.tensors.max_resident_bytes,
          "bytes all resident tensors may hold (nothing is evicted); 0: a quarter of the device's memory");
ABSL_FLAG(int64_t, max_tensors_per_peer, Defaults().arbiter.tensors.max_tensors_per_peer,
          "resident tensors one client may hold");
ABSL_FLAG(int64_t, max_sessions, Defaults().max_sessions,
          "sessions open at once on the fd socket (next to a unix: listener)");
ABSL_FLAG(int64_t, unix_socket_buffer_bytes, Defaults().unix_socket_buffer_bytes,
          "SO_SNDBUF and SO_RCVBUF asked for on unix: connections (replies cross in fewer wake-ups; "
          "the kernel caps them at net.core.wmem_max unless the daemon may force them); 0: the kernel's default");
ABSL_FLAG(int64_t, launch_graphs, Defaults().launch_graphs,
          "CUDA graphs kept per device stream: a dispatch repeated on the same operands (regions, "
          "resident tensors) replays its recorded launch, a few us of host time instead of 10-40; "
          "0: every dispatch launches as it is");
ABSL_FLAG(std::string, log_level, "",
          "trace, debug, info, warn, error, critical, off; unset: $ARBITER_LOG_LEVEL, else info");
ABSL_FLAG(std::string, log_format, "text", "text (one line per event) or json (one object per line)");
ABSL_FLAG(size_t, max_queue, Defaults().arbiter.max_queue,
          "dispatches that may wait for a device stream; more get RESOURCE_EXHAUSTED");
ABSL_FLAG(double, shutdown_grace_seconds, Defaults().shutdown_grace_seconds,
          "time in-flight calls get after SIGTERM");
ABSL_FLAG(std::string, port_file, Defaults().port_file, "write the bound port here once serving");
ABSL_FLAG(double, verify_fraction, Defaults().arbiter.verify_fraction,
          "share of dispatches also checked against the reference");
ABSL_FLAG(double, noise_multiple, Defaults().arbiter.noise.noise_multiple,
          "a challenger displaces the incumbent only when its speedup beats this many relative spreads");
ABSL_FLAG(double, noise_floor, Defaults().arbiter.noise.noise_floor,
          "smallest relative spread assumed when comparing candidates");
ABSL_FLAG(int64_t, refine_after, Defaults().arbiter.refine.hot_after,
          "a shape served this many times from figures measured at another shape of its bucket "
          "gets a verdict of its own, measured in the background; 0: only when named by tune");
ABSL_FLAG(int, refine_entrants, Defaults().arbiter.refine.max_leaders,
          "a refinement races at most this many of the bucket's winner and the candidates within "
          "--refine-leader-margin of it (the fastest at each stricter determinism level on top)");
ABSL_FLAG(double, refine_leader_margin, Defaults().arbiter.refine.leader_margin,
          "a candidate whose median in the bucket's race is within this fraction of the winner's "
          "is a leader, raced by the bucket's refinements");
ABSL_FLAG(int, refine_tile_entrants, Defaults().arbiter.refine.max_tile_entrants,
          "at most this many candidates whose declared tile fills the refined shape differently "
          "race a refinement on top of the leaders");
ABSL_FLAG(double, refine_device_budget_seconds, Defaults().arbiter.refine.device_budget_seconds,
          "device time of a refinement race's timed samples at most (a close race's extra rounds "
          "included)");
ABSL_FLAG(double, close_race_rounds, Defaults().arbiter.measure.extend_rounds,
          "a race whose fastest is ahead of the incumbent by median but not separated from it is "
          "timed again, those two alone, for up to this many times its rounds, within its device "
          "budget; 0: never");
ABSL_FLAG(std::string, admin_token_file, Defaults().admin_token_file,
          "file holding the bearer token Admin calls must carry; without it, loopback listeners only");
ABSL_FLAG(std::string, tls_cert, Defaults().tls.cert_file,
          "PEM certificate chain for the listener (with --tls-key)");
ABSL_FLAG(std::string, tls_key, Defaults().tls.key_file,
          "PEM private key for the listener (with --tls-cert)");
ABSL_FLAG(std::string, metrics_listen, Defaults().metrics_listen,
          "host:port serving Prometheus /metrics; empty: none");
ABSL_FLAG(double, tuning_budget_seconds, Defaults().arbiter.measure.wall_limit_seconds,
          "longest a bucket's timing phase runs (wall clock); past it, sampling stops and keeps what it has");
ABSL_FLAG(size_t, tuning_queue, Defaults().arbiter.tuning_queue,
          "buckets queued or being measured; a miss past it is answered with the tier default");
ABSL_FLAG(size_t, tuning_queue_per_peer, Defaults().arbiter.tuning_queue_per_peer,
          "of those, how many one client host may have asked for");
ABSL_FLAG(double, tuning_hang_seconds, Defaults().arbiter.tuning_hang_seconds,
          "a candidate under measurement with no progress this long has hung: arbiterd exits (status "
          "3) and quarantines it on restart");
ABSL_FLAG(std::string, tuning_intent_file, Defaults().arbiter.tuning_intent_file,
          "where the candidate being measured is recorded; empty: <store>.intent beside a file store");

namespace {

// absl flag names are identifiers ("--port_file"); operators write
// "--port-file". Both spellings are accepted: dashes in a flag's name (never in
// its value) become underscores before absl parses.
std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t c = 2; c < end; ++c) {
      if (arg[c] == '-') arg[c] = '_';
    }
  }
  return args;
}

DaemonOptions OptionsFromFlags() {
  DaemonOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.store_path = absl::GetFlag(FLAGS_store);
  options.store_password_file = absl::GetFlag(FLAGS_store_password_file);
  options.backend = absl::GetFlag(FLAGS_backend);
  options.device = absl::GetFlag(FLAGS_device);
  options.arbiter.tuning = absl::GetFlag(FLAGS_tuning);
  options.arbiter.workers = absl::GetFlag(FLAGS_workers);
  options.arbiter.max_queue = absl::GetFlag(FLAGS_max_queue);
  options.arbiter.verify_fraction = absl::GetFlag(FLAGS_verify_fraction);
  options.arbiter.noise.noise_multiple = absl::GetFlag(FLAGS_noise_multiple);
  options.arbiter.noise.noise_floor = absl::GetFlag(FLAGS_noise_floor);
  options.arbiter.refine.hot_after = absl::GetFlag(FLAGS_refine_after);
  options.arbiter.refine.max_leaders = absl::GetFlag(FLAGS_refine_entrants);
  options.arbiter.refine.leader_margin = absl::GetFlag(FLAGS_refine_leader_margin);
  options.arbiter.refine.max_tile_entrants = absl::GetFlag(FLAGS_refine_tile_entrants);
  options.arbiter.refine.device_budget_seconds = absl::GetFlag(FLAGS_refine_device_budget_seconds);
  options.arbiter.measure.extend_rounds = absl::GetFlag(FLAGS_close_race_rounds);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.arbiter.limits.max_operand_bytes = absl::GetFlag(FLAGS_max_operand_bytes);
  options.arbiter.regions.max_regions_per_peer = absl::GetFlag(FLAGS_max_regions_per_peer);
  options.arbiter.regions.max_bytes_per_peer = absl::GetFlag(FLAGS_max_region_bytes_per_peer);
  options.arbiter.regions.max_host_bytes_per_peer = absl::GetFlag(FLAGS_max_host_region_bytes_per_peer);
  options.arbiter.tensors.max_resident_bytes = absl::GetFlag(FLAGS_max_resident_bytes);
  options.arbiter.tensors.max_tensors_per_peer = absl::GetFlag(FLAGS_max_tensors_per_peer);
  options.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  options.unix_socket_buffer_bytes = absl::GetFlag(FLAGS_unix_socket_buffer_bytes);
  options.launch_graphs = absl::GetFlag(FLAGS_launch_graphs);
  options.shutdown_grace_seconds = absl::GetFlag(FLAGS_shutdown_grace_seconds);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  options.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.arbiter.measure.wall_limit_seconds = absl::GetFlag(FLAGS_tuning_budget_seconds);
  options.arbiter.tuning_queue = absl::GetFlag(FLAGS_tuning_queue);
  options.arbiter.tuning_queue_per_peer = absl::GetFlag(FLAGS_tuning_queue_per_peer);
  options.arbiter.tuning_hang_seconds = absl::GetFlag(FLAGS_tuning_hang_seconds);
  options.arbiter.tuning_intent_file = absl::GetFlag(FLAGS_tuning_intent_file);
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: request buffers freed are reused, not faulted in afresh.
  const bool heap_kept = arbiter::server::KeepFreedMemory();
  // Debian builds Abseil without NDEBUG, so every absl::Mutex acquisition -
  // gRPC's own and the engine's - would check the lock graph for cycles under
  // one process-wide lock: a serial point on every call. The tests keep the check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage("arbiterd: the Arbiter matmul kernel-selection daemon");
  std::vector<std::string> args = NormalizeFlagNames(argc, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& arg : args) arg_ptrs.push_back(arg.data());
  absl::ParseCommandLine(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  const arbiter::server::LogLevelChoice level = arbiter::server::ChooseLogLevel(
      absl::GetFlag(FLAGS_log_level), std::getenv(arbiter::server::kLogLevelEnv));
  if (absl::Status logging =
          arbiter::server::ConfigureLogging(absl::GetFlag(FLAGS_log_format), level.level);
      !logging.ok()) {
    spdlog::critical("{} (--log-format {}, log level \"{}\" from {})", logging.ToString(),
                     absl::GetFlag(FLAGS_log_format), level.level, level.origin);
    return 2;
  }
  // Refused under a sanitizer's allocator, which has its own policy: nothing to warn of.
  if (!heap_kept) spdlog::debug("malloc settings refused: freed request buffers may be faulted in afresh");

  // Blocked before any thread starts, so every thread inherits the mask and
  // only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto daemon = arbiter::server::Daemon::Create(OptionsFromFlags(), arbiter::server::TestCandidates());
  if (!daemon.ok()) {
    spdlog::critical("arbiterd failed to start: {}", daemon.status().ToString());
    return 1;
  }
  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("received {}, shutting down", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  if (!(*daemon)->Shutdown()) {
    // Work still inside a kernel when the grace ran out: exit without waiting for it.
    spdlog::default_logger()->flush();
    std::_Exit(0);
  }
  return 0;
}
