#include "server/daemon.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>

#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include "absl/base/attributes.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "arbiter/wire/unix_socket_buffers.h"
#include "backends/cpu/cpu_backend.h"
#include "engine/registry.h"
#include "engine/verdict_store.h"
#include "kernels/registry/cpu_candidates.h"
#include "server/admin_auth.h"
#include "server/admin_service.h"
#include "server/build_info.h"
#include "server/call_tracker.h"
#include "server/dispatch_service.h"
#include "server/fd_socket.h"
#include "server/metrics.h"
#include "server/metrics_endpoint.h"
#ifdef ARBITER_WITH_CUDA
#include "backends/cuda/cuda_backend.h"
#include "kernels/registry/cuda_candidates.h"
#endif

namespace arbiter::server {
namespace {

// Sets a Unix-socket buffer mutator on the server's channel arguments (the
// builder takes only int and string arguments itself).
class UnixSocketBuffersOption final : public grpc::ServerBuilderOption {
 public:
  explicit UnixSocketBuffersOption(int bytes) : bytes_(bytes) {}
  void UpdateArguments(grpc::ChannelArguments* args) override {
    args->SetSocketMutator(wire::NewUnixSocketBufferMutator(bytes_));
  }
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {}

 private:
  const int bytes_;
};

// The services the health checker reports on, besides the whole server ("").
constexpr const char* kHealthServices[] = {"", "arbiter.v1.Dispatch", "arbiter.v1.Admin"};
// The verdict store's own health entry: NOT_SERVING while it cannot be reached. The
// daemon itself keeps serving (what it holds), so this is detail, not readiness.
constexpr const char kStoreHealthService[] = "arbiter.v1.Store";

// Keeps an object that still-running work uses alive until the process ends: never
// destroyed, and reachable from a global, so it is not a leak (LeakSanitizer agrees).
template <typename T>
void KeepUntilExit(std::unique_ptr<T> object) {
  ABSL_CONST_INIT static absl::Mutex mu(absl::kConstInit);
  static auto* const kept = new std::vector<std::shared_ptr<void>>();
  absl::MutexLock lock(&mu);
  kept->push_back(std::move(object));
}

struct BackendAndRegistry {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Registry> registry;
};

// The backend's own candidates, then those the options add (tests), then any a
// test daemon binary adds for this backend.
std::vector<CandidateSpec> WithExtra(std::vector<CandidateSpec> candidates,
                                     const std::vector<CandidateSpec>& extra,
                                     const ExtraCandidates& linked, std::string_view backend) {
  candidates.insert(candidates.end(), extra.begin(), extra.end());
  if (linked) {
    for (CandidateSpec& c : linked(backend)) candidates.push_back(std::move(c));
  }
  return candidates;
}

absl::StatusOr<BackendAndRegistry> CreateCpu(const std::vector<CandidateSpec>& extra,
                                             const ExtraCandidates& linked) {
  ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> cpu, CpuBackend::Create(CpuBackendOptions{}));
  ASSIGN_OR_RETURN(std::unique_ptr<Registry> registry,
                   Registry::Create(WithExtra(CpuCandidates(cpu->threads()), extra, linked, "cpu"),
                                    *cpu));
  return BackendAndRegistry{std::move(cpu), std::move(registry)};
}

// Whether `device` (--device) names a GPU by UUID rather than by ordinal.
bool IsGpuUuid(const std::string& device) { return absl::StartsWith(device, "GPU-"); }

#ifdef ARBITER_WITH_CUDA
absl::StatusOr<BackendAndRegistry> CreateCuda(const std::vector<CandidateSpec>& extra,
                                              const ExtraCandidates& linked,
                                              const std::string& device, int64_t launch_graphs) {
  if (cuda::CudaBackend::VisibleDevices() <= 0) {
    return absl::FailedPreconditionError("backend cuda: no CUDA device is visible");
  }
  cuda::CudaBackendOptions options;
  options.launch_graphs = static_cast<size_t>(launch_graphs);
  if (IsGpuUuid(device)) {
    ASSIGN_OR_RETURN(options.device, cuda::CudaBackend::FindDevice(device));
  } else if (!device.empty() && !absl::SimpleAtoi(device, &options.device)) {
    return absl::InvalidArgumentError(absl::StrCat("device: \"", device, "\" is no ordinal"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> gpu, cuda::CudaBackend::Create(options));
  ASSIGN_OR_RETURN(std::unique_ptr<Registry> registry,
                   Registry::Create(WithExtra(cuda::CudaCandidates(*gpu), extra, linked, "cuda"),
                                    *gpu));
  return BackendAndRegistry{std::move(gpu), std::move(registry)};
}
#endif

absl::StatusOr<BackendAndRegistry> CreateBackend(BackendKind kind,
                                                 const std::vector<CandidateSpec>& extra,
                                                 const ExtraCandidates& linked,
                                                 const std::string& device,
                                                 int64_t launch_graphs) {
  // A daemon told which GPU to own serves that GPU or does not start.
  if (kind == BackendKind::kAuto && !device.empty()) kind = BackendKind::kCuda;
  switch (kind) {
    case BackendKind::kCpu:
      return CreateCpu(extra, linked);
    case BackendKind::kCuda:
#ifdef ARBITER_WITH_CUDA
      return CreateCuda(extra, linked, device, launch_graphs);
#else
      return absl::FailedPreconditionError("backend cuda: this arbiterd was built without CUDA");
#endif
    case BackendKind::kAuto:
#ifdef ARBITER_WITH_CUDA
      if (cuda::CudaBackend::VisibleDevices() > 0) return CreateCuda(extra, linked, device, launch_graphs);
#endif
      return CreateCpu(extra, linked);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend: no such kind (", static_cast<int>(kind), ")"));
}

absl::Status ValidateOptions(const DaemonOptions& o) {
  RETURN_IF_ERROR(ParseListeners(o.listen).status());
  if (!o.device.empty()) {
    int ordinal = 0;
    if (!IsGpuUuid(o.device) && !(absl::SimpleAtoi(o.device, &ordinal) && ordinal >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device: expected a CUDA device ordinal (0, 1, ...) or a GPU UUID (GPU-...), got \"",
          o.device, "\""));
    }
    if (o.backend == BackendKind::kCpu) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device: names a GPU (\"", o.device, "\"), but the backend is cpu; drop --device or use "
          "--backend cuda"));
    }
  }
  const ArbiterOptions& a = o.arbiter;
  if (a.workers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("workers: expected >= 1 (or 0: sized to the device), got ", a.workers));
  }
  if (o.max_message_bytes <= 0 || o.max_message_bytes > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("max-message-bytes: expected 1..", INT_MAX,
                                                   ", got ", o.max_message_bytes));
  }
  if (a.limits.max_operand_bytes < 1 || a.limits.max_operand_bytes > (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max-operand-bytes: expected 1..", int64_t{1} << 31,
                     " (kernels index elements with 32-bit arithmetic), got ", a.limits.max_operand_bytes));
  }
  const std::pair<const char*, int64_t> non_negative[] = {
      {"max-regions-per-peer", a.regions.max_regions_per_peer},
      {"max-region-bytes-per-peer", a.regions.max_bytes_per_peer},
      {"max-host-region-bytes-per-peer", a.regions.max_host_bytes_per_peer},
      {"max-resident-bytes", a.tensors.max_resident_bytes},
      {"max-tensors-per-peer", a.tensors.max_tensors_per_peer},
      {"max-sessions", o.max_sessions},
      {"launch-graphs", o.launch_graphs}};
  for (const auto& [flag, value] : non_negative) {
    if (value < 0) return absl::InvalidArgumentError(absl::StrCat(flag, ": expected >= 0, got ", value));
  }
  if (o.unix_socket_buffer_bytes < 0 || o.unix_socket_buffer_bytes > (1 << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unix-socket-buffer-bytes: expected 0 (the kernel's default) ..", 1 << 30, ", got ",
        o.unix_socket_buffer_bytes));
  }
  if (!(o.shutdown_grace_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("shutdown-grace-seconds: expected >= 0, got ",
                                                   o.shutdown_grace_seconds));
  }
  if (!(a.verify_fraction >= 0 && a.verify_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("verify-fraction: expected 0..1, got ", a.verify_fraction));
  }
  if (!(a.noise.noise_multiple >= 0 && a.noise.noise_multiple < 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise-multiple: expected a finite value >= 0, got ", a.noise.noise_multiple));
  }
  if (!(a.noise.noise_floor >= 0 && a.noise.noise_floor < 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise-floor: expected a finite value >= 0, got ", a.noise.noise_floor));
  }
  if (!(a.measure.wall_limit_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("tuning-budget-seconds: expected > 0, got ",
                                                   a.measure.wall_limit_seconds));
  }
  if (!(a.tuning_hang_seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tuning-hang-seconds: expected > 0, got ", a.tuning_hang_seconds));
  }
  if (a.refine.hot_after < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("refine-after: expected >= 0, got ", a.refine.hot_after));
  }
  if (a.refine.max_leaders < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refine-entrants: expected >= 1 (the bucket's winner races), got ", a.refine.max_leaders));
  }
  if (a.refine.max_tile_entrants < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("refine-tile-entrants: expected >= 0, got ", a.refine.max_tile_entrants));
  }
  if (!(a.refine.leader_margin >= 0 && a.refine.leader_margin < 1e6)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refine-leader-margin: expected a finite value >= 0, got ", a.refine.leader_margin));
  }
  if (!(a.refine.device_budget_seconds > 0 && a.refine.device_budget_seconds < 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("refine-device-budget-seconds: expected a finite value > 0, got ",
                     a.refine.device_budget_seconds));
  }
  if (!(a.measure.extend_rounds >= 0 && a.measure.extend_rounds <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("close-race-rounds: expected 0..10 (times a race's rounds), got ",
                     a.measure.extend_rounds));
  }
  if (!(o.health_poll_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("health-poll-seconds: expected > 0, got ",
                                                   o.health_poll_seconds));
  }
  return absl::OkStatus();
}

// Written to a temporary name and renamed, so a reader never sees a partial port.
absl::Status WritePortFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    if (!out.flush()) return absl::InternalError(absl::StrCat("port-file: cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("port-file: cannot rename ", tmp, " to ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

// The tuning intent file: as given, else beside a file store; none for an in-memory or remote one.
std::string IntentFileFor(const DaemonOptions& o) {
  if (!o.arbiter.tuning_intent_file.empty()) return o.arbiter.tuning_intent_file;
  if (o.store_path.empty() || o.store_path == ":memory:" ||
      o.store_path.find("://") != std::string::npos) {
    return "";
  }
  return o.store_path + ".intent";
}

// A candidate hung or faulted the device while being measured: the engine cannot
// go on. Exiting lets the supervisor restart arbiterd, and the restart
// quarantines the candidate the intent file names.
[[noreturn]] void ExitOnCandidateFault(const absl::Status& fault) {
  spdlog::critical(
      "exiting with status {} so that the supervisor restarts arbiterd: {}; the candidate is "
      "quarantined when it starts again",
      kExitCandidateFault, fault.ToString());
  spdlog::default_logger()->flush();
  std::_Exit(kExitCandidateFault);
}

// How long past the grace period Shutdown waits for work to notice it is over.
constexpr auto kShutdownMargin = std::chrono::seconds(1);

// "127.0.0.1:0" with port 43117 -> "127.0.0.1:43117"; a unix address as it is.
std::string BoundAddress(const std::string& listen, int port) {
  if (IsUnixListener(listen)) return listen;
  const size_t colon = listen.rfind(':');
  return absl::StrCat(colon == std::string::npos ? listen : listen.substr(0, colon), ":", port);
}

// Engine state for the metrics gauges, read at each scrape (on the endpoint's thread).
StoreOptions StoreOptionsOf(const DaemonOptions& options) {
  StoreOptions store;
  store.password_file = options.store_password_file;
  return store;
}

MetricsState ProbeState(Arbiter& arbiter) {
  MetricsState state;
  state.queue_depth = static_cast<int64_t>(arbiter.queue_depth());
  state.store_up = arbiter.StoreHealth().ok() ? 1 : 0;
  state.store_pending_writes = static_cast<int64_t>(arbiter.pending_store_writes());
  if (absl::StatusOr<int64_t> verdicts = arbiter.CountVerdicts(); verdicts.ok()) {
    state.verdicts_stored = *verdicts;
  }
  if (auto forces = arbiter.ListForces(); forces.ok()) {
    state.forces_active = static_cast<int64_t>(forces->size());
  }
  if (auto entries = arbiter.ListQuarantine(); entries.ok()) {
    std::set<std::string> candidates;
    for (const QuarantineEntry& q : *entries) candidates.insert(q.candidate);
    state.candidates_quarantined = static_cast<int64_t>(candidates.size());
  }
  state.regions = arbiter.regions().Totals();
  state.tensors = arbiter.tensors().Totals();
  return state;
}

}  // namespace

std::string_view BackendKindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kCuda: return "cuda";
  }
  return "unknown";
}

absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name) {
  for (BackendKind kind : {BackendKind::kAuto, BackendKind::kCpu, BackendKind::kCuda}) {
    if (name == BackendKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend: expected auto, cpu or cuda, got \"", std::string(name), "\""));
}

bool IsUnixListener(std::string_view address) { return address.starts_with("unix:"); }

int DefaultWorkers(std::string_view backend) { return backend == "cuda" ? 4 : 1; }

absl::StatusOr<std::vector<std::string>> ParseListeners(std::string_view listen) {
  if (listen.empty()) {
    return absl::InvalidArgumentError("listen: empty; expected host:port or unix:/path, comma-separated");
  }
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = listen.find(',', start);
    const std::string_view entry =
        listen.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (entry.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "listen: expected host:port or unix:/path, comma-separated; got \"", std::string(listen), "\""));
    }
    if (IsUnixListener(entry) && entry.size() == 5) {
      return absl::InvalidArgumentError("listen: unix: needs a path, e.g. unix:/run/arbiter/arbiter.sock");
    }
    out.emplace_back(entry);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Create(const DaemonOptions& options,
                                                        ExtraCandidates extra) {
  RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<Daemon> daemon(new Daemon(options, std::move(extra)));
  RETURN_IF_ERROR(daemon->Start());
  return daemon;
}

absl::Status Daemon::Start() {
  ASSIGN_OR_RETURN(listeners_, ParseListeners(options_.listen));
  // Refused before anything starts: an exposed listener without a token, bad TLS files.
  ASSIGN_OR_RETURN(auth_, AdminAuth::Create(AdminAuthOptions{.token_file = options_.admin_token_file,
                                                             .listen = options_.listen}));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(options_.tls));


  RETURN_IF_ERROR(StartEngine());
  RETURN_IF_ERROR(StartFdSocket());
  dispatch_ = std::make_unique<DispatchService>(
      *arbiter_, DispatchServiceOptions{.max_message_bytes = options_.max_message_bytes,
                                        .sessions = fd_socket_.get(),
                                        .metrics = metrics_.get(),
                                        .reply_memory = arbiter_->host_allocator()});
  admin_ = std::make_unique<AdminService>(
      *arbiter_,
      ServerIdentity{.version = kBuildVersion,
                     .store_path = RedactStoreLocation(options_.store_path),
                     .fd_socket = fd_socket_ != nullptr ? fd_socket_->path() : "",
                     .max_message_bytes = options_.max_message_bytes},
      auth_.get());
  spdlog::info("admin: {}", auth_->requires_token() ? "bearer token required"
                                                     : "no token (loopback listener only)");


  ASSIGN_OR_RETURN(const std::vector<std::string> addresses, StartServer(credentials));
  // The registry is verified and the store open: serving iff the device is healthy.
  {
    absl::MutexLock lock(&mu_);
    absl::Status health = arbiter_->Health();
    if (!health.ok()) spdlog::error("backend unhealthy at start: {}", health.ToString());
    SetServing(health.ok());
    server_->GetHealthCheckService()->SetServingStatus(kStoreHealthService, true);  // it opened
  }
  spdlog::info(
      "arbiterd {} (commit {}) listening on {} (tuning {}, {} workers, max queue {}, "
      "max message {} bytes)",
      kBuildVersion, kBuildCommit[0] != '\0' ? kBuildCommit : "unknown", absl::StrJoin(addresses, ", "),
      TuningPolicyName(options_.arbiter.tuning), arbiter_->options().workers,
      options_.arbiter.max_queue, options_.max_message_bytes);
  if (!options_.port_file.empty()) {
    RETURN_IF_ERROR(WritePortFile(options_.port_file,
                                  port_ != 0 ? std::to_string(port_) : addresses.front()));
  }
  health_watcher_ = std::thread([this] { WatchHealth(); });
  return absl::OkStatus();
}

absl::Status Daemon::StartEngine() {
  ASSIGN_OR_RETURN(BackendAndRegistry device,
                   CreateBackend(options_.backend, options_.extra_candidates, extra_,
                                 options_.device, options_.launch_graphs));
  const DeviceInfo info = device.backend->info();
  spdlog::info("backend {}: {} ({}), {} candidates registered", info.backend, info.name,
               info.arch, device.registry->candidates().size());
  for (const RegisteredCandidate& c : device.registry->candidates()) {
    if (!c.device_ok) spdlog::info("candidate {} is ineligible here: {}", c.spec.name, c.device_reason);
  }

  ASSIGN_OR_RETURN(std::unique_ptr<VerdictStore> store,
                   VerdictStore::Open(options_.store_path, StoreOptionsOf(options_)));
  spdlog::info("verdict store {} open (schema {})", store->Describe(), store->schema_version());

  metrics_ = std::make_unique<Metrics>(
      MetricsOptions{.version = kBuildVersion,
                     .commit = kBuildCommit,
                     .candidates = CandidateLabelsOf(*device.registry)},
      info);
  if (!options_.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(metrics_endpoint_,
                     MetricsEndpoint::Create({.listen = options_.metrics_listen},
                                             [metrics = metrics_.get()] { return metrics->Scrape(); }));
    spdlog::info("metrics on http://{}/metrics",
                 BoundAddress(options_.metrics_listen, metrics_endpoint_->port()));
  }

  ArbiterOptions engine = options_.arbiter;
  if (engine.workers == 0) engine.workers = DefaultWorkers(info.backend);
  engine.tuning_intent_file = IntentFileFor(options_);
  if (!engine.on_fault) engine.on_fault = ExitOnCandidateFault;
  if (!engine.tuning_intent_file.empty()) {
    spdlog::info("tuning intent file {}", engine.tuning_intent_file);
  }
  ASSIGN_OR_RETURN(arbiter_, Arbiter::Create(engine, std::move(device.backend),
                                             std::move(device.registry), std::move(store)));
  arbiter_->set_observer(metrics_.get());
  return absl::OkStatus();
}

absl::Status Daemon::StartFdSocket() {
  for (const std::string& listener : listeners_) {
    if (!IsUnixListener(listener)) continue;
    ASSIGN_OR_RETURN(
        fd_socket_,
        FdSocket::Start(FdSocketOptions{.path = listener.substr(5) + ".fd",
                                        .max_sessions = options_.max_sessions},
                        [arbiter = arbiter_.get()](const Peer& peer) {
                          const int regions = arbiter->regions().ReleaseOwner(peer.owner());
                          const int tensors = arbiter->tensors().ReleaseOwner(peer.owner());
                          arbiter->completions().ReleaseOwner(peer.owner());
                          if (regions + tensors > 0) {
                            spdlog::info("{} ended: released {} regions and {} resident tensors",
                                         peer.ToString(), regions, tensors);
                          }
                        }));
    spdlog::info("fd socket (sessions, descriptors for regions) on {}", fd_socket_->path());
    break;
  }
  metrics_->SetStateProbe([arbiter = arbiter_.get(), sessions = fd_socket_.get()] {
    MetricsState state = ProbeState(*arbiter);
    state.sessions = sessions != nullptr ? sessions->count() : 0;
    return state;
  });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Daemon::StartServer(
    const std::shared_ptr<grpc::ServerCredentials>& credentials) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC answers each listener's bound port here; a unix socket's is 1 on success.
  std::vector<int> bound(listeners_.size(), 0);
  for (size_t i = 0; i < listeners_.size(); ++i) {
    builder.AddListeningPort(listeners_[i], credentials, &bound[i]);
  }
  builder.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
  // gRPC sets SO_REUSEPORT by default: a second daemon on a taken port would
  // "start" and split the traffic. Refuse the port instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Unix-socket connections with buffers of a few MiB: a Matmul's C crosses in a
  // few wake-ups instead of one per 208 KiB (unix_socket_buffers.h).
  if (options_.unix_socket_buffer_bytes > 0) {
    builder.SetOption(std::make_unique<UnixSocketBuffersOption>(
        static_cast<int>(options_.unix_socket_buffer_bytes)));
  }
  // gRPC's sync server keeps at most MAX_POLLERS idle threads (default 2): past
  // them, a thread that finished a call exits, and a call arriving with no idle
  // thread left makes a new one - under a few concurrent clients, a thread
  // created and joined for nearly every call (about 230 a second at 6.8k
  // Selects/s with 16 clients, perf's task:task_newtask). An idle thread costs
  // its stack; 64 of them cover the concurrency a node's clients bring.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 64);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(metrics_->NewInterceptorFactory(options_.max_message_bytes));
  calls_ = std::make_unique<CallTracker>();
  interceptors.push_back(calls_->NewInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.RegisterService(dispatch_.get());
  builder.RegisterService(admin_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen));
  }
  std::vector<std::string> addresses;
  for (size_t i = 0; i < listeners_.size(); ++i) {
    if (bound[i] <= 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", listeners_[i]));
    if (port_ == 0 && !IsUnixListener(listeners_[i])) port_ = bound[i];
    addresses.push_back(BoundAddress(listeners_[i], bound[i]));
  }
  return addresses;
}

void Daemon::SetServing(bool serving) {
  for (const char* service : kHealthServices) {
    server_->GetHealthCheckService()->SetServingStatus(service, serving);
  }
  metrics_->SetServing(serving);
  if (serving != serving_) {
    spdlog::info("health: {}", serving ? "SERVING" : "NOT_SERVING");
    serving_ = serving;
  }
}

void Daemon::WatchHealth() {
  const absl::Duration period = absl::Seconds(options_.health_poll_seconds);
  mu_.Lock();
  // Wakes early once Shutdown sets stopping_.
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), period)) {
    mu_.Unlock();
    const absl::Status health = arbiter_->Health();
    const absl::Status store = arbiter_->StoreHealth();
    mu_.Lock();
    if (stopping_) break;
    if (store.ok() != store_up_) {
      if (store.ok()) {
        spdlog::info("verdict store reachable again");
      } else {
        spdlog::error("verdict store unreachable: {} (serving what this daemon holds; admin "
                      "changes refused until it returns)",
                      store.ToString());
      }
      store_up_ = store.ok();
      server_->GetHealthCheckService()->SetServingStatus(kStoreHealthService, store_up_);
    }
    if (!health.ok() && serving_) spdlog::error("backend unhealthy: {}", health.ToString());
    if (health.ok() != serving_) SetServing(health.ok());
  }
  mu_.Unlock();
}

bool Daemon::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return clean_;
    stopping_ = true;
    if (server_ != nullptr) {
      // Every service NOT_SERVING from now on; later updates are ignored.
      server_->GetHealthCheckService()->Shutdown();
      serving_ = false;
      if (metrics_ != nullptr) metrics_->SetServing(false);
      spdlog::info("health: NOT_SERVING (shutting down)");
    }
  }
  if (health_watcher_.joinable()) health_watcher_.join();
  const auto grace = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.shutdown_grace_seconds));
  const auto deadline = std::chrono::steady_clock::now() + grace;
  // Measurements first: nothing queued starts, and the running one stops at its
  // next checkpoint, so no caller waits for one.
  if (arbiter_ != nullptr) arbiter_->StopTuning();
  if (server_ != nullptr) {
    spdlog::info("shutting down: {} calls in flight get up to {} s", calls_->in_flight(),
                 options_.shutdown_grace_seconds);
    // Shutdown stops accepting at once and returns when every call has ended and
    // every connection closed, cancelling what is left at the deadline. It runs
    // aside: its wait for idle connections is cut short below.
    std::promise<void> done;
    std::future<void> stopped = done.get_future();
    std::thread stopper([server = server_.get(),
                         until = std::chrono::system_clock::now() + grace,
                         done = std::move(done)]() mutable {
      server->Shutdown(until);
      server->Wait();
      done.set_value();
    });
    calls_->WaitIdle(absl::Now() + absl::FromChrono(grace));
    // No call in flight: a client's idle connection is all that is left, and the
    // clients are told by the connection closing (repeated: it only reaches the
    // connections open when it runs).
    while (stopped.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      if (calls_->in_flight() == 0) grpc_server_cancel_all_calls(server_->c_server());
      if (stopped.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready) break;
      if (std::chrono::steady_clock::now() > deadline + kShutdownMargin) {
        clean_ = false;
        break;
      }
    }
    if (clean_) {
      stopper.join();
      server_.reset();
    } else {
      spdlog::warn("shutdown grace spent with {} calls still running inside a kernel; exiting "
                   "without waiting for them",
                   calls_->in_flight());
      stopper.detach();
    }
  }
  if (clean_ && arbiter_ != nullptr && !arbiter_->WaitTuningStopped(deadline + kShutdownMargin)) {
    spdlog::warn("shutdown grace spent with a measurement still inside a kernel; exiting "
                 "without waiting for it");
    clean_ = false;
  }
  if (!clean_) {
    if (arbiter_ != nullptr) arbiter_->AbandonTuning();
    return false;
  }
  admin_.reset();
  dispatch_.reset();
  fd_socket_.reset();  // sessions closed; their regions and tensors go with the Arbiter
  // The probe reads the Arbiter; the Arbiter reports to the metrics until it is gone.
  metrics_endpoint_.reset();
  if (metrics_ != nullptr) metrics_->SetStateProbe(nullptr);
  if (arbiter_ != nullptr) {
    arbiter_.reset();  // closes the store
    spdlog::info("verdict store {} closed", RedactStoreLocation(options_.store_path));
  }
  metrics_.reset();
  return true;
}

std::string Daemon::fd_socket_path() const {
  return fd_socket_ != nullptr ? fd_socket_->path() : "";
}

int Daemon::metrics_port() const {
  return metrics_endpoint_ != nullptr ? metrics_endpoint_->port() : 0;
}

Daemon::Daemon(const DaemonOptions& options, ExtraCandidates extra)
    : options_(options), extra_(std::move(extra)) {}

Daemon::~Daemon() {
  if (Shutdown()) return;
  // Work still runs inside a kernel and uses these: never destroyed, the process is ending.
  KeepUntilExit(std::move(server_));
  KeepUntilExit(std::move(admin_));
  KeepUntilExit(std::move(auth_));  // the admin service's
  KeepUntilExit(std::move(dispatch_));
  KeepUntilExit(std::move(fd_socket_));
  KeepUntilExit(std::move(arbiter_));
  KeepUntilExit(std::move(metrics_endpoint_));
  KeepUntilExit(std::move(metrics_));
  KeepUntilExit(std::move(calls_));
}

}  // namespace arbiter::server
