// arbiterd: parse flags, build DaemonOptions, Daemon::Create, wait for SIGTERM/SIGINT.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "server/daemon.h"
#include "server/logging.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "host:port to serve on; port 0 picks a free one");
ABSL_FLAG(std::string, store, "./arbiter.db",
          "verdict store: a SQLite file path, or a postgresql:// URI shared by a fleet of daemons");
ABSL_FLAG(std::string, store_password_file, "",
          "PostgreSQL store: file whose first line is the password (else PGPASSWORD or PGPASSFILE)");
ABSL_FLAG(std::string, backend, "auto", "auto (cuda when a GPU is visible), cpu or cuda");
ABSL_FLAG(std::string, tuning, "sync", "on a verdict miss: sync (measure, then answer), async, off");
ABSL_FLAG(int, workers, 1, "device streams for dispatch and tuning");
ABSL_FLAG(int64_t, max_message_bytes, 600ll << 20,
          "largest request or response; the default fits 8192x8192 f32 operands");
ABSL_FLAG(std::string, log_level, "",
          "trace, debug, info, warn, error, critical, off; unset: $ARBITER_LOG_LEVEL, else info");
ABSL_FLAG(std::string, log_format, "text", "text (one line per event) or json (one object per line)");
ABSL_FLAG(int64_t, max_queue, 64,
          "dispatches that may wait for a device stream; more get RESOURCE_EXHAUSTED");
ABSL_FLAG(double, shutdown_grace_seconds, 10, "time in-flight calls get after SIGTERM");
ABSL_FLAG(std::string, port_file, "", "write the bound port here once serving");
ABSL_FLAG(double, verify_fraction, 0, "share of dispatches also checked against the reference");
ABSL_FLAG(double, noise_multiple, 2.0,
          "a challenger displaces the incumbent only when its speedup beats this many relative spreads");
ABSL_FLAG(double, noise_floor, 0.01, "smallest relative spread assumed when comparing candidates");
ABSL_FLAG(std::string, admin_token_file, "",
          "file holding the bearer token Admin calls must carry; without it, loopback listeners only");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for the listener (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for the listener (with --tls-cert)");
ABSL_FLAG(std::string, metrics_listen, "", "host:port serving Prometheus /metrics; empty: none");

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

}  // namespace

int main(int argc, char** argv) {
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

  arbiter::server::DaemonOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.store_path = absl::GetFlag(FLAGS_store);
  options.store_password_file = absl::GetFlag(FLAGS_store_password_file);
  options.backend = absl::GetFlag(FLAGS_backend);
  const auto tuning = arbiter::ParseTuningPolicy(absl::GetFlag(FLAGS_tuning));
  if (!tuning) {
    spdlog::critical("--tuning: expected sync, async or off, got \"{}\"", absl::GetFlag(FLAGS_tuning));
    return 2;
  }
  options.tuning = *tuning;
  options.workers = absl::GetFlag(FLAGS_workers);
  options.max_queue = absl::GetFlag(FLAGS_max_queue);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.shutdown_grace_seconds = absl::GetFlag(FLAGS_shutdown_grace_seconds);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  options.verify_fraction = absl::GetFlag(FLAGS_verify_fraction);
  options.noise.noise_multiple = absl::GetFlag(FLAGS_noise_multiple);
  options.noise.noise_floor = absl::GetFlag(FLAGS_noise_floor);
  options.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);

  // Blocked before any thread starts, so every thread inherits the mask and
  // only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto daemon = arbiter::server::Daemon::Create(options);
  if (!daemon.ok()) {
    spdlog::critical("arbiterd failed to start: {}", daemon.status().ToString());
    return 1;
  }
  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("received {}, shutting down", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  (*daemon)->Shutdown();
  return 0;
}
