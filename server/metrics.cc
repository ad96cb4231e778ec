#include "server/metrics.h"

#include <sstream>
#include <type_traits>
#include <utility>

#include <grpcpp/support/byte_buffer.h>
#include <prometheus/text_serializer.h>

#include "arbiter/v1/arbiter.pb.h"

namespace arbiter::server {
namespace {

// 1, 2.5, 5 per decade from 10^lo to 10^hi inclusive. Each bound is the double
// nearest its decimal value (an exact integer power of ten, multiplied or
// divided once), so the exposition's le labels read "0.00025", not "0.00025000000000000001".
std::vector<double> Decades(int lo, int hi) {
  std::vector<double> bounds;
  for (int e = lo; e <= hi; ++e) {
    double power = 1;
    for (int i = 0; i < (e < 0 ? -e : e); ++i) power *= 10;
    for (double step : {1.0, 2.5, 5.0}) {
      if (e == hi && step > 1) break;
      bounds.push_back(e < 0 ? step / power : step * power);
    }
  }
  return bounds;
}

// The canonical name of a status code ("OK", "RESOURCE_EXHAUSTED"): gRPC and
// absl share the numbering, so one label vocabulary serves RPCs and dispatches.
std::string CodeName(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  return name.empty() ? "UNKNOWN" : name;
}

std::string CapabilityLabel(int compute_capability) {
  if (compute_capability <= 0) return "";
  return std::to_string(compute_capability / 10) + "." + std::to_string(compute_capability % 10);
}

std::string VersionOf(const DeviceInfo& device, const std::string& key) {
  auto it = device.versions.find(key);
  return it == device.versions.end() ? "" : it->second;
}

// RPC method names of every service in the wire contract, for the series made up front.
std::vector<std::string> ContractMethods() {
  std::vector<std::string> methods;
  const google::protobuf::FileDescriptor* file = v1::MatmulRequest::descriptor()->file();
  for (int s = 0; s < file->service_count(); ++s) {
    const google::protobuf::ServiceDescriptor* service = file->service(s);
    for (int m = 0; m < service->method_count(); ++m) methods.push_back(service->method(m)->name());
  }
  return methods;
}

constexpr VerdictSource kAllSources[] = {VerdictSource::kMeasured, VerdictSource::kForced,
                                         VerdictSource::kTierDefault, VerdictSource::kProvisional};

}  // namespace

namespace {

// One per RPC: created when the call arrives, done when its status is sent (or,
// for a call that ends without one, when gRPC destroys it). What it records is
// what the client receives: a reply larger than the server's send limit never
// reaches the client (gRPC would fail the call with RESOURCE_EXHAUSTED), so it is
// replaced by an empty message with that status, said plainly, and counted so.
class RpcInterceptor : public grpc::experimental::Interceptor {
 public:
  RpcInterceptor(Metrics* metrics, std::string_view path, int64_t max_send_bytes)
      : scope_(metrics, path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1)),
        max_send_bytes_(max_send_bytes),
        metrics_(metrics),
        matmul_(path == "/arbiter.v1.Dispatch/Matmul"),
        arrived_(Clock::now()) {}

  // Destroyed once the call's last operation completed: the reply is sent.
  ~RpcInterceptor() override {
    if (matmul_ && metrics_ != nullptr && ok_) {
      metrics_->ObserveStage(DispatchStage::kReceive, Seconds(arrived_, received_));
      metrics_->ObserveStage(DispatchStage::kSend, Seconds(replying_, Clock::now()));
    }
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (matmul_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      received_ = Clock::now();
    }
    if (matmul_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      replying_ = Clock::now();
    }
    if (max_send_bytes_ > 0 &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      // Serializes the reply now rather than later: the same work, done once.
      grpc::ByteBuffer* reply = methods->GetSerializedSendMessage();
      if (reply != nullptr && static_cast<int64_t>(reply->Length()) > max_send_bytes_) {
        oversized_bytes_ = static_cast<int64_t>(reply->Length());
        grpc::Slice empty;
        *reply = grpc::ByteBuffer(&empty, 1);
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      if (oversized_bytes_ > 0 && methods->GetSendStatus().ok()) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            "reply of " + std::to_string(oversized_bytes_) + " bytes exceeds --max-message-bytes " +
                std::to_string(max_send_bytes_)));
      }
      ok_ = methods->GetSendStatus().ok();
      scope_.Finish(methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double Seconds(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  }

  Metrics::RpcScope scope_;
  const int64_t max_send_bytes_;
  int64_t oversized_bytes_ = 0;
  Metrics* const metrics_;
  const bool matmul_;  // the per-stage breakdown is the Matmul's
  bool ok_ = false;
  Clock::time_point arrived_, received_, replying_;
};

class RpcInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  RpcInterceptorFactory(Metrics* metrics, int64_t max_send_bytes)
      : metrics_(metrics), max_send_bytes_(max_send_bytes) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcInterceptor(metrics_, info->method() == nullptr ? "" : info->method(),
                              max_send_bytes_);
  }

 private:
  Metrics* metrics_;
  const int64_t max_send_bytes_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
Metrics::NewInterceptorFactory(int64_t max_send_message_bytes) {
  return std::make_unique<RpcInterceptorFactory>(this, max_send_message_bytes);
}

std::vector<CandidateLabels> CandidateLabelsOf(const Registry& registry) {
  std::vector<CandidateLabels> labels;
  for (const RegisteredCandidate& c : registry.candidates()) {
    CandidateLabels& l = labels.emplace_back();
    l.name = c.spec.name;
    for (const CandidateMember& member : c.spec.members) l.dtypes.push_back(member.contract.dtype);
  }
  return labels;
}

std::vector<double> Metrics::KernelBuckets() { return Decades(-6, 1); }
std::vector<double> Metrics::RpcBuckets() { return Decades(-4, 2); }
std::vector<double> Metrics::TuningBuckets() { return Decades(-2, 3); }
std::vector<double> Metrics::StageBuckets() { return Decades(-6, 1); }

const char* DispatchStageName(DispatchStage stage) {
  switch (stage) {
    case DispatchStage::kReceive: return "receive";
    case DispatchStage::kPrepare: return "prepare";
    case DispatchStage::kLease: return "lease";
    case DispatchStage::kH2D: return "h2d";
    case DispatchStage::kLaunch: return "launch";
    case DispatchStage::kKernel: return "kernel";
    case DispatchStage::kD2H: return "d2h";
    case DispatchStage::kSend: return "send";
  }
  return "unknown";
}
std::vector<double> Metrics::PhaseBuckets() { return Decades(-5, 3); }

Metrics::Metrics(const MetricsOptions& options, const DeviceInfo& device)
    : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  kernel_seconds_.family = &prometheus::BuildHistogram()
      .Name("arbiter_kernel_seconds")
      .Help("Device time of dispatched kernels, by the device timer")
      .Register(r);
  kernel_seconds_.buckets = KernelBuckets();
  dispatches_.family = &prometheus::BuildCounter()
      .Name("arbiter_dispatches_total")
      .Help("Dispatches by serving candidate, verdict source and outcome (status code)")
      .Register(r);
  relative_error_.family = &prometheus::BuildGauge()
      .Name("arbiter_candidate_relative_error")
      .Help("Last measured max relative error against the reference (origin: tuning or sampled)")
      .Register(r);
  accuracy_violations_.family = &prometheus::BuildCounter()
      .Name("arbiter_accuracy_violations_total")
      .Help("Outputs outside the candidate's declared accuracy budget, in tuning or sampled checks")
      .Register(r);
  sampled_.family = &prometheus::BuildCounter()
      .Name("arbiter_sampled_verifications_total")
      .Help("Live dispatches also run through the reference, by outcome: pass, fail (confirmed on "
            "the daemon's own operands; quarantined), unconfirmed, unjudgeable")
      .Register(r);
  quarantines_.family = &prometheus::BuildCounter()
      .Name("arbiter_quarantines_total")
      .Help("Quarantine entries recorded, by candidate")
      .Register(r);
  rpc_seconds_.family = &prometheus::BuildHistogram()
      .Name("arbiter_rpc_seconds")
      .Help("RPC handling time, by method and status code")
      .Register(r);
  rpc_seconds_.buckets = RpcBuckets();
  rpcs_.family = &prometheus::BuildCounter()
      .Name("arbiter_rpcs_total")
      .Help("RPCs handled, by method and status code")
      .Register(r);

  auto& cache = prometheus::BuildCounter()
      .Name("arbiter_verdict_cache_total")
      .Help("Verdict lookups on selection: hit (a served verdict or force) or miss")
      .Register(r);
  cache_hits_ = &cache.Add({{"result", "hit"}});
  cache_misses_ = &cache.Add({{"result", "miss"}});
  tuning_runs_ = &prometheus::BuildCounter()
      .Name("arbiter_tuning_runs_total")
      .Help("Bucket measurements completed")
      .Register(r)
      .Add({});
  tuning_seconds_ = &prometheus::BuildHistogram()
      .Name("arbiter_tuning_seconds")
      .Help("Wall time of bucket measurements")
      .Register(r)
      .Add({}, TuningBuckets());
  auto& phases = prometheus::BuildHistogram()
      .Name("arbiter_tuning_phase_seconds")
      .Help("Wall time of each phase of a bucket measurement: setup (operands), reference, "
            "oracle, determinism (claim re-runs), warmup, flush (cold cache), timing")
      .Register(r);
  for (const auto& [phase, seconds] : TuningCost{}.Phases()) {
    tuning_phase_seconds_.push_back(&phases.Add({{"phase", phase}}, PhaseBuckets()));
  }

  auto gauge = [&r](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
  };
  auto& stages = prometheus::BuildHistogram()
      .Name("arbiter_dispatch_stage_seconds")
      .Help("Host wall time of each stage of successful Matmuls, none overlapping another: "
            "receive (arrival to request received), prepare (parsing, checks, region lookups, "
            "selection, buffers, the response's fields), lease (waiting for a device stream), h2d, "
            "launch (the kernel enqueued), kernel (enqueued to its end seen), d2h, "
            "send (reply serialized and sent)")
      .Register(r);
  for (DispatchStage stage : kDispatchStages) {
    stage_seconds_[static_cast<int>(stage)] =
        &stages.Add({{"stage", DispatchStageName(stage)}}, StageBuckets());
  }
  auto& launches = prometheus::BuildCounter()
      .Name("arbiter_dispatch_launches_total")
      .Help("Successful Matmuls by how their work was enqueued: replayed (a CUDA graph recorded "
            "at an earlier dispatch of the same candidate, shape and operand addresses) or "
            "launched (the candidate's own launch)")
      .Register(r);
  launches_replayed_ = &launches.Add({{"how", "replayed"}});
  launches_launched_ = &launches.Add({{"how", "launched"}});
  regions_ = gauge("arbiter_regions", "Client memory regions mapped for zero-copy operands");
  region_bytes_ = gauge("arbiter_region_bytes", "Bytes of client memory regions mapped");
  tensors_ = gauge("arbiter_resident_tensors", "Resident tensors held");
  tensor_bytes_ = gauge("arbiter_resident_bytes", "Bytes held by resident tensors");
  sessions_ = gauge("arbiter_sessions", "Sessions open on the fd socket");
  regions_by_uid_.family = &prometheus::BuildGauge()
      .Name("arbiter_peer_regions")
      .Help("Regions mapped, by the owning peer's uid")
      .Register(r);
  region_bytes_by_uid_.family = &prometheus::BuildGauge()
      .Name("arbiter_peer_region_bytes")
      .Help("Bytes of regions mapped, by the owning peer's uid")
      .Register(r);
  tensor_bytes_by_uid_.family = &prometheus::BuildGauge()
      .Name("arbiter_peer_resident_bytes")
      .Help("Bytes of resident tensors, by the owning peer's uid (-1: TCP peers)")
      .Register(r);
  inflight_ = gauge("arbiter_inflight_requests", "RPCs being handled");
  queue_depth_ = gauge("arbiter_queue_depth", "Dispatches waiting for a device stream");
  verdicts_stored_ = gauge("arbiter_verdicts_stored", "Measured verdicts stored for this device");
  forces_active_ = gauge("arbiter_forces_active", "Buckets with a forced candidate");
  store_up_ = gauge("arbiter_store_up",
                    "1 while the verdict store answers; 0 while it cannot be reached (the daemon "
                    "serves what it holds and refuses admin changes it cannot make durable)");
  store_pending_writes_ = gauge("arbiter_store_pending_writes",
                                "Verdicts measured while the store was down, not yet written back");
  candidates_quarantined_ =
      gauge("arbiter_candidates_quarantined", "Candidates with at least one quarantine entry");
  serving_ = gauge("arbiter_serving", "1 when grpc.health.v1 reports SERVING, else 0");

  prometheus::BuildGauge()
      .Name("arbiter_build_info")
      .Help("Build of this arbiterd; always 1")
      .Register(r)
      .Add({{"version", options.version}, {"commit", options.commit}})
      .Set(1);
  prometheus::BuildGauge()
      .Name("arbiter_device_info")
      .Help("The device this daemon serves; always 1 (uuid joins with DCGM's series)")
      .Register(r)
      .Add({{"backend", device.backend},
            {"name", device.name},
            {"capability", CapabilityLabel(device.compute_capability)},
            {"driver", VersionOf(device, "driver")},
            {"runtime", VersionOf(device, "runtime")},
            {"uuid", device.uuid}})
      .Set(1);

  // Series that exist from the first scrape: dashboards and increase()-based
  // alerts see a zero rather than nothing.
  for (const CandidateLabels& c : options.candidates) {
    for (DType dtype : c.dtypes) {
      const prometheus::Labels labels{{"candidate", c.name}, {"dtype", std::string(DTypeName(dtype))}};
      Preload(kernel_seconds_, labels);
      Preload(accuracy_violations_, labels);
      for (VerificationOutcome outcome :
           {VerificationOutcome::kPass, VerificationOutcome::kFail,
            VerificationOutcome::kUnconfirmed, VerificationOutcome::kUnjudgeable}) {
        prometheus::Labels with_outcome = labels;
        with_outcome["outcome"] = VerificationOutcomeName(outcome);
        Preload(sampled_, with_outcome);
      }
    }
    for (VerdictSource source : kAllSources) {
      Preload(dispatches_, {{"candidate", c.name},
                            {"source", std::string(VerdictSourceName(source))},
                            {"outcome", CodeName(absl::StatusCode::kOk)}});
    }
    Preload(quarantines_, {{"candidate", c.name}});
  }
  for (const std::string& method : ContractMethods()) {
    const prometheus::Labels labels{{"method", method}, {"code", CodeName(absl::StatusCode::kOk)}};
    Preload(rpc_seconds_, labels);
    Preload(rpcs_, labels);
  }
}

std::string Metrics::Scrape() {
  std::ostringstream out;
  RefreshState();
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

template <typename T>
void Metrics::Preload(Handles<T>& handles, const prometheus::Labels& labels) {
  if constexpr (std::is_same_v<T, prometheus::Histogram>) {
    handles.fixed[labels] = &handles.family->Add(labels, handles.buckets);
  } else {
    handles.fixed[labels] = &handles.family->Add(labels);
  }
}

template <typename T>
T& Metrics::Get(Handles<T>& handles, const prometheus::Labels& labels) {
  if (auto it = handles.fixed.find(labels); it != handles.fixed.end()) return *it->second;
  absl::MutexLock lock(&handles.mu);
  auto [it, inserted] = handles.dynamic.try_emplace(labels, nullptr);
  if (inserted) {
    if constexpr (std::is_same_v<T, prometheus::Histogram>) {
      it->second = &handles.family->Add(labels, handles.buckets);
    } else {
      it->second = &handles.family->Add(labels);
    }
  }
  return *it->second;
}

void Metrics::OnSelection(const Problem&, const Selection&, bool cache_hit) {
  (cache_hit ? cache_hits_ : cache_misses_)->Increment();
}

void Metrics::OnDispatch(const Problem& p, const Selection& s, double device_seconds,
                         const absl::Status& status) {
  // A dispatch refused before any candidate was chosen has no candidate or source.
  const bool selected = !s.candidate.empty();
  Get(dispatches_, {{"candidate", selected ? s.candidate : "none"},
                    {"source", selected ? std::string(VerdictSourceName(s.source)) : "none"},
                    {"outcome", CodeName(status.code())}})
      .Increment();
  // No device time: completed by event, the daemon never waited for the kernel.
  if (status.ok() && selected && device_seconds > 0) {
    Get(kernel_seconds_, {{"candidate", s.candidate}, {"dtype", std::string(DTypeName(p.dtype))}})
        .Observe(device_seconds);
  }
}

void Metrics::OnTuning(const Problem& p, const Verdict& v, double wall_seconds) {
  tuning_runs_->Increment();
  tuning_seconds_->Observe(wall_seconds);
  const auto phases = v.cost.Phases();
  for (size_t i = 0; i < phases.size() && i < tuning_phase_seconds_.size(); ++i) {
    tuning_phase_seconds_[i]->Observe(phases[i].second);
  }
  const std::string dtype(DTypeName(v.dtype));
  for (const CandidateResult& r : v.results) {
    // Only these states carry oracle figures; the others never produced an output.
    const bool checked = r.state == ResultState::kTimed || r.state == ResultState::kFailedOracle;
    if (!checked) continue;
    Get(relative_error_, {{"candidate", r.name}, {"dtype", dtype}, {"origin", "tuning"}})
        .Set(r.max_rel_error);
    if (r.state == ResultState::kFailedOracle) {
      Get(accuracy_violations_, {{"candidate", r.name}, {"dtype", dtype}}).Increment();
    }
  }
}

void Metrics::OnQuarantine(const QuarantineEntry& q) {
  Get(quarantines_, {{"candidate", q.candidate}}).Increment();
}

void Metrics::OnVerification(const Problem& p, const Selection& s, double max_rel_error,
                             VerificationOutcome outcome) {
  const std::string& candidate = s.candidate;
  const std::string dtype(DTypeName(p.dtype));
  Get(sampled_, {{"candidate", candidate}, {"dtype", dtype},
                 {"outcome", VerificationOutcomeName(outcome)}})
      .Increment();
  if (outcome == VerificationOutcome::kUnjudgeable) return;
  Get(relative_error_, {{"candidate", candidate}, {"dtype", dtype}, {"origin", "sampled"}})
      .Set(max_rel_error);
  if (outcome == VerificationOutcome::kFail) {
    Get(accuracy_violations_, {{"candidate", candidate}, {"dtype", dtype}}).Increment();
  }
}

void Metrics::SetServing(bool serving) { serving_->Set(serving ? 1 : 0); }

void Metrics::SetStateProbe(std::function<MetricsState()> probe) {
  absl::MutexLock lock(&probe_mu_);
  probe_ = std::move(probe);
}

void Metrics::RefreshState() {
  absl::MutexLock lock(&probe_mu_);
  if (!probe_) return;
  const MetricsState state = probe_();
  auto set = [](prometheus::Gauge* gauge, const std::optional<int64_t>& value) {
    if (value) gauge->Set(static_cast<double>(*value));
  };
  set(queue_depth_, state.queue_depth);
  set(verdicts_stored_, state.verdicts_stored);
  set(forces_active_, state.forces_active);
  set(candidates_quarantined_, state.candidates_quarantined);
  set(store_up_, state.store_up);
  set(store_pending_writes_, state.store_pending_writes);
  set(sessions_, state.sessions);
  if (state.regions) {
    regions_->Set(static_cast<double>(state.regions->count));
    region_bytes_->Set(static_cast<double>(state.regions->bytes));
    SetPerUid(regions_by_uid_, region_uids_, *state.regions, false);
    SetPerUid(region_bytes_by_uid_, region_uids_, *state.regions, true);
    for (const auto& [uid, counts] : state.regions->per_uid) region_uids_.insert(uid);
  }
  if (state.tensors) {
    tensors_->Set(static_cast<double>(state.tensors->count));
    tensor_bytes_->Set(static_cast<double>(state.tensors->bytes));
    SetPerUid(tensor_bytes_by_uid_, tensor_uids_, *state.tensors, true);
    for (const auto& [uid, counts] : state.tensors->per_uid) tensor_uids_.insert(uid);
  }
}

void Metrics::SetPerUid(Handles<prometheus::Gauge>& gauges, std::set<int>& seen,
                        const ResidencyTotals& totals, bool bytes) {
  for (int uid : seen) {
    if (!totals.per_uid.contains(uid)) Get(gauges, {{"uid", std::to_string(uid)}}).Set(0);
  }
  for (const auto& [uid, counts] : totals.per_uid) {
    Get(gauges, {{"uid", std::to_string(uid)}})
        .Set(static_cast<double>(bytes ? counts.second : counts.first));
  }
}

void Metrics::ObserveLaunch(bool replayed) {
  (replayed ? launches_replayed_ : launches_launched_)->Increment();
}

void Metrics::ObserveStage(DispatchStage stage, double seconds) {
  stage_seconds_[static_cast<int>(stage)]->Observe(seconds);
}

void Metrics::RpcStarted() { inflight_->Increment(); }

void Metrics::RpcFinished(std::string_view method, grpc::StatusCode code, double seconds) {
  inflight_->Decrement();
  const prometheus::Labels labels{{"method", std::string(method)},
                                  {"code", CodeName(static_cast<absl::StatusCode>(code))}};
  Get(rpc_seconds_, labels).Observe(seconds);
  Get(rpcs_, labels).Increment();
}

Metrics::RpcScope::RpcScope(Metrics* metrics, std::string_view method)
    : metrics_(metrics), method_(method), start_(std::chrono::steady_clock::now()) {
  if (metrics_) metrics_->RpcStarted();
}

Metrics::RpcScope::~RpcScope() {
  if (!finished_) Finish(grpc::Status(grpc::StatusCode::CANCELLED, "handler left without a status"));
}

const grpc::Status& Metrics::RpcScope::Finish(const grpc::Status& status) {
  if (metrics_ && !finished_) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
    metrics_->RpcFinished(method_, status.error_code(), elapsed.count());
  }
  finished_ = true;
  return status;
}

}  // namespace arbiter::server
