#include "server/metrics.h"

#include <sstream>
#include <type_traits>
#include <utility>

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
// for a call that ends without one, when gRPC destroys it).
class RpcInterceptor : public grpc::experimental::Interceptor {
 public:
  RpcInterceptor(Metrics* metrics, std::string_view path)
      : scope_(metrics, path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      scope_.Finish(methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  Metrics::RpcScope scope_;
};

class RpcInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcInterceptor(metrics_, info->method() == nullptr ? "" : info->method());
  }

 private:
  Metrics* metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
Metrics::NewInterceptorFactory() {
  return std::make_unique<RpcInterceptorFactory>(this);
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
      .Help("Live dispatches also run through the reference and compared")
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
  inflight_ = gauge("arbiter_inflight_requests", "RPCs being handled");
  queue_depth_ = gauge("arbiter_queue_depth", "Dispatches waiting for a device stream");
  verdicts_stored_ = gauge("arbiter_verdicts_stored", "Measured verdicts stored for this device");
  forces_active_ = gauge("arbiter_forces_active", "Buckets with a forced candidate");
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
      Preload(sampled_, labels);
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
  if (status.ok() && selected) {
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
                             bool pass) {
  const std::string& candidate = s.candidate;
  const std::string dtype(DTypeName(p.dtype));
  Get(sampled_, {{"candidate", candidate}, {"dtype", dtype}}).Increment();
  Get(relative_error_, {{"candidate", candidate}, {"dtype", dtype}, {"origin", "sampled"}})
      .Set(max_rel_error);
  if (!pass) {
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
