// Prometheus metrics of one daemon. Metrics owns the prometheus-cpp registry;
// Scrape() renders it as the text exposition that MetricsEndpoint serves at
// /metrics (prometheus-cpp's Exposer is not used: metrics_endpoint.h says why).
// Every family is built once in the constructor; label handles the daemon
// knows up front (each registered candidate x its dtypes, each RPC method) are
// created then too, so their series exist from the first scrape and the hot
// path finds them without a lock. Any other label set is created on first use
// and cached under a mutex (prometheus-cpp's Family::Add is too slow to call
// per dispatch).
//
// Naming follows Prometheus conventions: prefix arbiter_, base units, counters
// end in _total, and labels take bounded values only - candidate names from the
// registry, dtypes, verdict sources, status codes, RPC method names - never
// shapes, buckets or client identities.
//
// Engine events arrive through the ArbiterObserver interface; RPCs are recorded
// by a server interceptor (or, by hand, RpcScope - not both); gauges that mirror engine state (queue depth,
// verdicts stored, forces, quarantine) are read at scrape time from a probe the
// daemon installs.
//
// Thread-safe: provides internal synchronization.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "engine/arbiter.h"
#include "engine/backend.h"
#include "engine/region_table.h"
#include "engine/registry.h"
#include "engine/status.h"

namespace arbiter::server {

// A candidate and the dtypes it has members for: the label sets created up front.
struct CandidateLabels {
  std::string name;
  std::vector<DType> dtypes;
};
std::vector<CandidateLabels> CandidateLabelsOf(const Registry& registry);

struct MetricsOptions {
  std::string version;                       // arbiter_build_info{version}
  std::string commit;                        // arbiter_build_info{commit}
  std::vector<CandidateLabels> candidates;   // series created at start, at zero
};

// Engine state mirrored into gauges at each scrape. Unset fields leave their
// gauge as it was.
struct MetricsState {
  std::optional<int64_t> queue_depth;             // dispatches waiting for a stream
  std::optional<int64_t> verdicts_stored;         // measured verdicts of this device
  std::optional<int64_t> forces_active;
  std::optional<int64_t> candidates_quarantined;  // distinct candidates with an entry
  std::optional<int64_t> store_up;                // 1 while the verdict store answers, else 0
  std::optional<int64_t> store_pending_writes;    // verdicts measured while it was down
  std::optional<ResidencyTotals> regions;         // client memory mapped
  std::optional<ResidencyTotals> tensors;         // resident tensors
  std::optional<int64_t> sessions;                // fd socket sessions open
};

// The stages of one Matmul, for arbiter_dispatch_stage_seconds{stage}: in the
// order they happen, none overlapping another, together the daemon's time from
// the call's arrival to its status sent.
enum class DispatchStage {
  kReceive,  // "receive": the call's arrival to its request's bytes all received
  kPrepare,  // "prepare": the rest of the handler - parsing the small fields, checks, region and
             // tensor lookups, selection, buffers, the response's fields
  kLease,    // "lease": waiting for a device stream (the bounded queue)
  kH2D,      // "h2d": inline operands gathered from the received bytes to the device
  kLaunch,   // "launch": the kernel enqueued - the wait on the client's event (if any), the
             // device timer's events and the candidate's launch call(s), on the host
  kKernel,   // "kernel": from the kernel enqueued to its end seen by the host (the one wait
             // for the device; C is complete there after it)
  kD2H,      // "d2h": C copied back for an inline reply
  kSend,     // "send": the reply serialized and sent
};
inline constexpr DispatchStage kDispatchStages[] = {
    DispatchStage::kReceive, DispatchStage::kPrepare, DispatchStage::kLease,
    DispatchStage::kH2D,     DispatchStage::kLaunch,  DispatchStage::kKernel,
    DispatchStage::kD2H,     DispatchStage::kSend};
const char* DispatchStageName(DispatchStage stage);

class Metrics : public ArbiterObserver {
 public:
  // Histogram bucket bounds, in seconds.
  static std::vector<double> KernelBuckets();  // 1 us .. 10 s
  static std::vector<double> RpcBuckets();     // 100 us .. 100 s
  static std::vector<double> TuningBuckets();  // 10 ms .. 1000 s
  static std::vector<double> StageBuckets();   // 1 us .. 10 s
  static std::vector<double> PhaseBuckets();   // 10 us .. 1000 s

  // Builds every family, and the series of `options.candidates`, at zero.
  Metrics(const MetricsOptions& options, const DeviceInfo& device);
  ~Metrics() override = default;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The text exposition of a scrape: refreshes the state gauges from the
  // probe, then renders every family. Called on MetricsEndpoint's thread.
  std::string Scrape();

  // ArbiterObserver. Called on engine threads.
  void OnSelection(const Problem& p, const Selection& s, bool cache_hit) override;
  void OnDispatch(const Problem& p, const Selection& s, double device_seconds,
                  const absl::Status& status) override;
  void OnTuning(const Problem& p, const Verdict& v, double wall_seconds) override;
  void OnQuarantine(const QuarantineEntry& q) override;
  // A live dispatch that was also run through the reference (sampled
  // verification), counted by outcome. Sets the sampled relative-error gauge
  // (unless nothing could be judged); counts a violation only when the failure
  // was confirmed on the daemon's own operands - a client's data is not a kernel's fault.
  void OnVerification(const Problem& p, const Selection& s, double max_rel_error,
                      VerificationOutcome outcome) override;

  // Health as reported by grpc.health.v1: arbiter_serving is 1 when SERVING.
  void SetServing(bool serving);

  // One stage of a successful Matmul (receive and send come from the
  // interceptor; the others from the handler).
  void ObserveStage(DispatchStage stage, double seconds);
  // How a successful Matmul's work was enqueued: a recording replayed, or launched.
  void ObserveLaunch(bool replayed);

  // Installs the function read at each scrape to refresh the state gauges; it
  // runs on the scraping thread and must be thread-safe. Pass nullptr before
  // destroying what it reads (the Arbiter outlives no Metrics, so clear it at
  // shutdown before the Arbiter goes).
  void SetStateProbe(std::function<MetricsState()> probe);

  // Records every RPC of a server built with it: in flight until its status is
  // sent, then arbiter_rpc_seconds / arbiter_rpcs_total by method (the name
  // after the last '/' of the gRPC path) and code. The Metrics must outlive
  // the server. Use either this or RpcScope in handlers, not both.
  // `max_send_message_bytes` (0: none) is the server's send limit: a reply over
  // it is refused here with RESOURCE_EXHAUSTED - what the client would get -
  // and recorded with that code.
  //   std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> f;
  //   f.push_back(metrics->NewInterceptorFactory());
  //   builder.experimental().SetInterceptorCreators(std::move(f));
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewInterceptorFactory(
      int64_t max_send_message_bytes = 0);

  // One RPC: in flight from construction until Finish (or destruction, which
  // records it as CANCELLED if Finish was never called). `method` is the RPC's
  // name as in the .proto ("Matmul", "Force", ...). `metrics` may be null.
  class RpcScope {
   public:
    RpcScope(Metrics* metrics, std::string_view method);
    ~RpcScope();
    RpcScope(const RpcScope&) = delete;
    RpcScope& operator=(const RpcScope&) = delete;
    // Records the outcome; returns `status` so a handler can `return scope.Finish(s);`.
    const grpc::Status& Finish(const grpc::Status& status);

   private:
    Metrics* metrics_;
    std::string method_;
    std::chrono::steady_clock::time_point start_;
    bool finished_ = false;
  };

  // What RpcScope does, for callers that time RPCs themselves.
  void RpcStarted();
  void RpcFinished(std::string_view method, grpc::StatusCode code, double seconds);

 private:
  // Label handles: those made in the constructor are read without a lock;
  // later ones live in `dynamic`, under the family's own mutex.
  template <typename T>
  struct Handles {
    prometheus::Family<T>* family = nullptr;
    std::vector<double> buckets;  // histograms only
    std::map<prometheus::Labels, T*> fixed;  // immutable after the constructor
    absl::Mutex mu;
    std::map<prometheus::Labels, T*> dynamic ABSL_GUARDED_BY(mu);
  };

  template <typename T>
  T& Get(Handles<T>& handles, const prometheus::Labels& labels);
  template <typename T>
  void Preload(Handles<T>& handles, const prometheus::Labels& labels);
  void RefreshState();
  // Sets `gauges` per uid from `totals`, and to 0 for uids seen before and gone now.
  void SetPerUid(Handles<prometheus::Gauge>& gauges, std::set<int>& seen,
                 const ResidencyTotals& totals, bool bytes);

  std::shared_ptr<prometheus::Registry> registry_;

  Handles<prometheus::Histogram> kernel_seconds_;     // {candidate,dtype}
  Handles<prometheus::Counter> dispatches_;           // {candidate,source,outcome}
  Handles<prometheus::Gauge> relative_error_;         // {candidate,dtype,origin}
  Handles<prometheus::Counter> accuracy_violations_;  // {candidate,dtype}
  Handles<prometheus::Counter> sampled_;              // {candidate,dtype}
  Handles<prometheus::Counter> quarantines_;          // {candidate}
  Handles<prometheus::Histogram> rpc_seconds_;        // {method,code}
  Handles<prometheus::Counter> rpcs_;                 // {method,code}
  prometheus::Counter* cache_hits_ = nullptr;
  prometheus::Counter* cache_misses_ = nullptr;
  prometheus::Counter* tuning_runs_ = nullptr;
  prometheus::Histogram* tuning_seconds_ = nullptr;
  // {phase}: one series per TuningCost phase, in its order, built in the constructor.
  std::vector<prometheus::Histogram*> tuning_phase_seconds_;
  prometheus::Gauge* inflight_ = nullptr;
  prometheus::Gauge* queue_depth_ = nullptr;
  prometheus::Gauge* verdicts_stored_ = nullptr;
  prometheus::Gauge* forces_active_ = nullptr;
  prometheus::Gauge* candidates_quarantined_ = nullptr;
  prometheus::Gauge* store_up_ = nullptr;
  prometheus::Gauge* store_pending_writes_ = nullptr;
  prometheus::Gauge* serving_ = nullptr;
  prometheus::Histogram* stage_seconds_[std::size(kDispatchStages)] = {};  // by DispatchStage
  prometheus::Counter* launches_replayed_ = nullptr;  // arbiter_dispatch_launches_total{how}
  prometheus::Counter* launches_launched_ = nullptr;
  prometheus::Gauge* regions_ = nullptr;
  prometheus::Gauge* region_bytes_ = nullptr;
  prometheus::Gauge* tensors_ = nullptr;
  prometheus::Gauge* tensor_bytes_ = nullptr;
  prometheus::Gauge* sessions_ = nullptr;
  Handles<prometheus::Gauge> regions_by_uid_;       // {uid}
  Handles<prometheus::Gauge> region_bytes_by_uid_;  // {uid}
  Handles<prometheus::Gauge> tensor_bytes_by_uid_;  // {uid}

  // Held while the probe runs, so SetStateProbe(nullptr) waits out a scrape in progress.
  absl::Mutex probe_mu_;
  std::function<MetricsState()> probe_ ABSL_GUARDED_BY(probe_mu_);
  std::set<int> region_uids_ ABSL_GUARDED_BY(probe_mu_);  // uids given a per-uid series
  std::set<int> tensor_uids_ ABSL_GUARDED_BY(probe_mu_);
};

}  // namespace arbiter::server
