#include "server/metrics.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "arbiter/v1/arbiter.grpc.pb.h"

namespace arbiter::server {
namespace {

// The value of one series in a text exposition, e.g.
// Value(s, "arbiter_tuning_runs_total") or Value(s, R"(x{a="b"})"); nullopt when absent.
// Labels appear sorted by name, as prometheus-cpp writes them.
std::optional<double> Value(const std::string& scrape, const std::string& series) {
  std::istringstream lines(scrape);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

DeviceInfo GpuDevice() {
  DeviceInfo d;
  d.backend = "cuda";
  d.name = "NVIDIA H200";
  d.arch = "sm_90";
  d.compute_capability = 90;
  d.uuid = "GPU-0f3c";
  d.versions = {{"driver", "580.65"}, {"runtime", "13.0"}};
  return d;
}

MetricsOptions Options() {
  MetricsOptions o;
  o.version = "0.1.0";
  o.commit = "abc123";
  o.candidates = {{"tiled", {DType::kF32, DType::kBF16}}, {"blas", {DType::kF32}}};
  return o;
}

std::unique_ptr<Metrics> MakeMetrics(const MetricsOptions& options = Options()) {
  return std::make_unique<Metrics>(options, GpuDevice());
}

Selection Selected(const std::string& candidate, VerdictSource source) {
  Selection s;
  s.candidate = candidate;
  s.version = 1;
  s.source = source;
  return s;
}

CandidateResult Result(const std::string& name, ResultState state, double rel) {
  CandidateResult r;
  r.name = name;
  r.version = 1;
  r.state = state;
  r.max_rel_error = rel;
  return r;
}

const Problem kF32{DType::kF32, 100, 60, 33};

TEST(MetricsTest, RegisteredCandidateSeriesExistAtZeroBeforeAnyDispatch) {
  const std::string s = MakeMetrics()->Scrape();
  EXPECT_EQ(Value(s, R"(arbiter_kernel_seconds_count{candidate="tiled",dtype="bf16"})"), 0);
  EXPECT_EQ(Value(s, R"(arbiter_accuracy_violations_total{candidate="blas",dtype="f32"})"), 0);
  EXPECT_EQ(Value(s, R"(arbiter_dispatches_total{candidate="blas",outcome="OK",source="measured"})"), 0);
  EXPECT_EQ(Value(s, R"(arbiter_rpcs_total{code="OK",method="Matmul"})"), 0);
  EXPECT_EQ(Value(s, R"(arbiter_rpcs_total{code="OK",method="Force"})"), 0);
  // Only the dtypes a candidate has members for.
  EXPECT_FALSE(Value(s, R"(arbiter_kernel_seconds_count{candidate="blas",dtype="bf16"})"));
}

TEST(MetricsTest, DispatchRecordsKernelTimeByCandidateAndDtype) {
  auto m = MakeMetrics();
  m->OnDispatch(kF32, Selected("tiled", VerdictSource::kMeasured), 3e-4, absl::OkStatus());
  m->OnDispatch(kF32, Selected("tiled", VerdictSource::kMeasured), 5e-4, absl::OkStatus());
  const std::string s = m->Scrape();
  EXPECT_EQ(Value(s, R"(arbiter_kernel_seconds_count{candidate="tiled",dtype="f32"})"), 2);
  EXPECT_NEAR(*Value(s, R"(arbiter_kernel_seconds_sum{candidate="tiled",dtype="f32"})"), 8e-4, 1e-12);
  EXPECT_EQ(Value(s, R"(arbiter_kernel_seconds_bucket{candidate="tiled",dtype="f32",le="0.0001"})"), 0);
  EXPECT_EQ(Value(s, R"(arbiter_kernel_seconds_bucket{candidate="tiled",dtype="f32",le="0.0005"})"), 2);
  EXPECT_EQ(Value(s, R"(arbiter_dispatches_total{candidate="tiled",outcome="OK",source="measured"})"), 2);
  EXPECT_EQ(Value(s, R"(arbiter_kernel_seconds_count{candidate="blas",dtype="f32"})"), 0);
}

TEST(MetricsTest, CandidateOutsideTheRegisteredListIsStillCounted) {
  auto m = MakeMetrics();
  m->OnDispatch(kF32, Selected("late", VerdictSource::kForced), 1e-3, absl::OkStatus());
  m->OnDispatch(kF32, Selected("late", VerdictSource::kForced), 1e-3, absl::OkStatus());
  const std::string s = m->Scrape();
  EXPECT_EQ(Value(s, R"(arbiter_kernel_seconds_count{candidate="late",dtype="f32"})"), 2);
  EXPECT_EQ(Value(s, R"(arbiter_dispatches_total{candidate="late",outcome="OK",source="forced"})"), 2);
}

TEST(MetricsTest, RefusedDispatchCountsItsCodeAndNoKernelTime) {
  auto m = MakeMetrics();
  m->OnDispatch(kF32, Selection{}, 0, absl::ResourceExhaustedError("queue full"));
  m->OnDispatch(kF32, Selected("tiled", VerdictSource::kMeasured), 0, absl::InternalError("launch"));
  const std::string s = m->Scrape();
  EXPECT_EQ(Value(s, R"(arbiter_dispatches_total{candidate="none",outcome="RESOURCE_EXHAUSTED",source="none"})"), 1);
  EXPECT_EQ(Value(s, R"(arbiter_dispatches_total{candidate="tiled",outcome="INTERNAL",source="measured"})"), 1);
  EXPECT_EQ(Value(s, R"(arbiter_kernel_seconds_count{candidate="tiled",dtype="f32"})"), 0);
}

TEST(MetricsTest, TuningSetsRelativeErrorOfCheckedCandidatesAndCountsOracleFailures) {
  auto m = MakeMetrics();
  Verdict v;
  v.dtype = DType::kF32;
  v.results = {Result("tiled", ResultState::kTimed, 2e-7), Result("blas", ResultState::kFailedOracle, 0.25),
               Result("slow", ResultState::kUnmeasured, 0)};
  m->OnTuning(kF32, v, 1.5);
  const std::string s = m->Scrape();
  EXPECT_EQ(Value(s, "arbiter_tuning_runs_total"), 1);
  EXPECT_EQ(Value(s, "arbiter_tuning_seconds_count"), 1);
  EXPECT_EQ(Value(s, "arbiter_tuning_seconds_sum"), 1.5);
  EXPECT_NEAR(*Value(s, R"(arbiter_candidate_relative_error{candidate="tiled",dtype="f32",origin="tuning"})"),
              2e-7, 1e-12);
  EXPECT_EQ(Value(s, R"(arbiter_candidate_relative_error{candidate="blas",dtype="f32",origin="tuning"})"), 0.25);
  EXPECT_EQ(Value(s, R"(arbiter_accuracy_violations_total{candidate="blas",dtype="f32"})"), 1);
  EXPECT_EQ(Value(s, R"(arbiter_accuracy_violations_total{candidate="tiled",dtype="f32"})"), 0);
}

TEST(MetricsTest, TuningObservesTheTimeOfEachMeasurementPhase) {
  auto m = MakeMetrics();
  Verdict v;
  v.dtype = DType::kF32;
  v.cost.reference = 0.25;
  v.cost.timing = 0.5;
  m->OnTuning(kF32, v, 1.0);
  m->OnTuning(kF32, v, 1.0);
  const std::string s = m->Scrape();
  EXPECT_EQ(Value(s, R"(arbiter_tuning_phase_seconds_sum{phase="reference"})"), 0.5);
  EXPECT_EQ(Value(s, R"(arbiter_tuning_phase_seconds_sum{phase="timing"})"), 1.0);
  EXPECT_EQ(Value(s, R"(arbiter_tuning_phase_seconds_count{phase="flush"})"), 2);
  for (const char* phase : {"setup", "reference", "oracle", "determinism", "warmup", "flush", "timing"}) {
    EXPECT_TRUE(Value(s, absl::StrCat(R"(arbiter_tuning_phase_seconds_count{phase=")", phase, R"("})")))
        << phase;
  }
  // A candidate that produced no output has no error to report.
  EXPECT_FALSE(Value(s, R"(arbiter_candidate_relative_error{candidate="slow",dtype="f32",origin="tuning"})"));
}

TEST(MetricsTest, SampledVerificationsCountByOutcomeAndOnlyAConfirmedFailureIsAViolation) {
  auto m = MakeMetrics();
  const Selection tiled = Selected("tiled", VerdictSource::kMeasured);
  m->OnVerification(kF32, tiled, 1e-6, VerificationOutcome::kPass);
  m->OnVerification(kF32, tiled, 2e-6, VerificationOutcome::kUnconfirmed);
  m->OnVerification(kF32, tiled, 0, VerificationOutcome::kUnjudgeable);
  std::string s = m->Scrape();
  for (const char* outcome : {"pass", "unconfirmed", "unjudgeable"}) {
    EXPECT_EQ(Value(s, absl::StrCat(R"(arbiter_sampled_verifications_total{candidate="tiled",dtype="f32",outcome=")",
                                    outcome, R"("})")),
              1)
        << outcome;
  }
  // The client's data failed, not the kernel: no violation, and the error gauge holds the
  // kernel's error on the daemon's own operands, untouched by the unjudgeable sample.
  EXPECT_EQ(Value(s, R"(arbiter_accuracy_violations_total{candidate="tiled",dtype="f32"})"), 0);
  EXPECT_EQ(Value(s, R"(arbiter_candidate_relative_error{candidate="tiled",dtype="f32",origin="sampled"})"), 2e-6);

  m->OnVerification(kF32, tiled, 0.5, VerificationOutcome::kFail);
  s = m->Scrape();
  EXPECT_EQ(Value(s, R"(arbiter_sampled_verifications_total{candidate="tiled",dtype="f32",outcome="fail"})"), 1);
  EXPECT_EQ(Value(s, R"(arbiter_candidate_relative_error{candidate="tiled",dtype="f32",origin="sampled"})"), 0.5);
  EXPECT_EQ(Value(s, R"(arbiter_accuracy_violations_total{candidate="tiled",dtype="f32"})"), 1);
}

TEST(MetricsTest, SelectionsCountVerdictCacheHitsAndMisses) {
  auto m = MakeMetrics();
  m->OnSelection(kF32, Selected("tiled", VerdictSource::kMeasured), true);
  m->OnSelection(kF32, Selected("tiled", VerdictSource::kMeasured), true);
  m->OnSelection(kF32, Selected("tiled", VerdictSource::kTierDefault), false);
  const std::string s = m->Scrape();
  EXPECT_EQ(Value(s, R"(arbiter_verdict_cache_total{result="hit"})"), 2);
  EXPECT_EQ(Value(s, R"(arbiter_verdict_cache_total{result="miss"})"), 1);
}

TEST(MetricsTest, QuarantineIsCountedPerCandidate) {
  auto m = MakeMetrics();
  QuarantineEntry q;
  q.candidate = "blas";
  q.scope = "*";
  m->OnQuarantine(q);
  EXPECT_EQ(Value(m->Scrape(), R"(arbiter_quarantines_total{candidate="blas"})"), 1);
}

TEST(MetricsTest, RpcScopeCountsInFlightThenMethodAndCode) {
  auto m = MakeMetrics();
  {
    Metrics::RpcScope scope(m.get(), "Force");
    EXPECT_EQ(Value(m->Scrape(), "arbiter_inflight_requests"), 1);
    grpc::Status returned = scope.Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no"));
    EXPECT_EQ(returned.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  { Metrics::RpcScope abandoned(m.get(), "Matmul"); }
  const std::string s = m->Scrape();
  EXPECT_EQ(Value(s, "arbiter_inflight_requests"), 0);
  EXPECT_EQ(Value(s, R"(arbiter_rpcs_total{code="PERMISSION_DENIED",method="Force"})"), 1);
  EXPECT_EQ(Value(s, R"(arbiter_rpc_seconds_count{code="PERMISSION_DENIED",method="Force"})"), 1);
  EXPECT_EQ(Value(s, R"(arbiter_rpcs_total{code="CANCELLED",method="Matmul"})"), 1);
  EXPECT_EQ(Value(s, R"(arbiter_rpcs_total{code="OK",method="Force"})"), 0);
}

TEST(MetricsTest, InterceptorRecordsEveryRpcByMethodAndCode) {
  auto m = MakeMetrics();
  v1::Admin::Service unimplemented;  // every method answers UNIMPLEMENTED
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
  factories.push_back(m->NewInterceptorFactory());
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&unimplemented);
  builder.experimental().SetInterceptorCreators(std::move(factories));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  auto stub = v1::Admin::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext context;
    v1::ServerInfoResponse response;
    EXPECT_EQ(stub->ServerInfo(&context, v1::ServerInfoRequest(), &response).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  const std::string s = m->Scrape();
  EXPECT_EQ(Value(s, R"(arbiter_rpcs_total{code="UNIMPLEMENTED",method="ServerInfo"})"), 2);
  EXPECT_EQ(Value(s, R"(arbiter_rpc_seconds_count{code="UNIMPLEMENTED",method="ServerInfo"})"), 2);
  EXPECT_EQ(Value(s, "arbiter_inflight_requests"), 0);
  server->Shutdown();
}

TEST(MetricsTest, RpcScopeWithoutMetricsRecordsNothingAndPassesTheStatusThrough) {
  Metrics::RpcScope scope(nullptr, "Select");
  EXPECT_EQ(scope.Finish(grpc::Status::CANCELLED).error_code(), grpc::StatusCode::CANCELLED);
}

TEST(MetricsTest, StateGaugesAreReadFromTheProbeAtScrape) {
  auto m = MakeMetrics();
  int64_t depth = 3;
  m->SetStateProbe([&depth] {
    MetricsState state;
    state.queue_depth = depth;
    state.verdicts_stored = 12;
    state.forces_active = 1;
    state.candidates_quarantined = 2;
    return state;
  });
  std::string s = m->Scrape();
  EXPECT_EQ(Value(s, "arbiter_queue_depth"), 3);
  EXPECT_EQ(Value(s, "arbiter_verdicts_stored"), 12);
  EXPECT_EQ(Value(s, "arbiter_forces_active"), 1);
  EXPECT_EQ(Value(s, "arbiter_candidates_quarantined"), 2);
  depth = 5;
  EXPECT_EQ(Value(m->Scrape(), "arbiter_queue_depth"), 5);

  // After the probe is cleared the gauges keep their last values.
  m->SetStateProbe(nullptr);
  depth = 9;
  EXPECT_EQ(Value(m->Scrape(), "arbiter_queue_depth"), 5);
}

TEST(MetricsTest, ServingGaugeFollowsHealth) {
  auto m = MakeMetrics();
  EXPECT_EQ(Value(m->Scrape(), "arbiter_serving"), 0);
  m->SetServing(true);
  EXPECT_EQ(Value(m->Scrape(), "arbiter_serving"), 1);
  m->SetServing(false);
  EXPECT_EQ(Value(m->Scrape(), "arbiter_serving"), 0);
}

TEST(MetricsTest, BuildAndDeviceInfoCarryTheirLabels) {
  const std::string s = MakeMetrics()->Scrape();
  EXPECT_EQ(Value(s, R"(arbiter_build_info{commit="abc123",version="0.1.0"})"), 1);
  EXPECT_EQ(Value(s, R"(arbiter_device_info{backend="cuda",capability="9.0",driver="580.65",)"
                     R"(name="NVIDIA H200",runtime="13.0",uuid="GPU-0f3c"})"),
            1);
}

// Prometheus conventions the dashboards and alerts rely on.
TEST(MetricsTest, EveryFamilyIsPrefixedAndTypedByItsSuffix) {
  auto m = MakeMetrics();
  // The error gauge has a series only once set.
  m->OnVerification(kF32, Selected("tiled", VerdictSource::kMeasured), 1e-6,
                    VerificationOutcome::kPass);
  std::map<std::string, std::string> types;
  std::istringstream lines(m->Scrape());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream fields(line.substr(7));
    std::string name, type;
    fields >> name >> type;
    types[name] = type;
    EXPECT_EQ(name.rfind("arbiter_", 0), 0u) << name;
    EXPECT_EQ(type == "counter", name.ends_with("_total")) << name << " is a " << type;
    if (type == "histogram") {
      EXPECT_TRUE(name.ends_with("_seconds")) << name;
    }
  }
  const std::map<std::string, std::string> expected = {
      {"arbiter_kernel_seconds", "histogram"},
      {"arbiter_dispatches_total", "counter"},
      {"arbiter_candidate_relative_error", "gauge"},
      {"arbiter_accuracy_violations_total", "counter"},
      {"arbiter_sampled_verifications_total", "counter"},
      {"arbiter_quarantines_total", "counter"},
      {"arbiter_rpc_seconds", "histogram"},
      {"arbiter_rpcs_total", "counter"},
      {"arbiter_inflight_requests", "gauge"},
      {"arbiter_queue_depth", "gauge"},
      {"arbiter_verdict_cache_total", "counter"},
      {"arbiter_tuning_runs_total", "counter"},
      {"arbiter_tuning_seconds", "histogram"},
      {"arbiter_tuning_phase_seconds", "histogram"},
      {"arbiter_verdicts_stored", "gauge"},
      {"arbiter_forces_active", "gauge"},
      {"arbiter_candidates_quarantined", "gauge"},
      {"arbiter_serving", "gauge"},
      {"arbiter_build_info", "gauge"},
      {"arbiter_device_info", "gauge"},
      {"arbiter_dispatch_stage_seconds", "histogram"},
      {"arbiter_dispatch_launches_total", "counter"},
      {"arbiter_regions", "gauge"},
      {"arbiter_region_bytes", "gauge"},
      {"arbiter_resident_tensors", "gauge"},
      {"arbiter_resident_bytes", "gauge"},
      {"arbiter_sessions", "gauge"},
      {"arbiter_store_up", "gauge"},
      {"arbiter_store_pending_writes", "gauge"},
  };
  EXPECT_EQ(types, expected);
}

TEST(MetricsTest, LaunchesCountReplayedAndLaunchedApartFromZero) {
  auto m = MakeMetrics();
  const std::string before = m->Scrape();
  EXPECT_NE(before.find("arbiter_dispatch_launches_total{how=\"replayed\"} 0"), std::string::npos)
      << before;
  EXPECT_NE(before.find("arbiter_dispatch_launches_total{how=\"launched\"} 0"), std::string::npos);
  m->ObserveLaunch(true);
  m->ObserveLaunch(true);
  m->ObserveLaunch(false);
  const std::string after = m->Scrape();
  EXPECT_NE(after.find("arbiter_dispatch_launches_total{how=\"replayed\"} 2"), std::string::npos)
      << after;
  EXPECT_NE(after.find("arbiter_dispatch_launches_total{how=\"launched\"} 1"), std::string::npos);
}

// promtool's lint of the exposition (the check CI runs on a live scrape).
TEST(MetricsTest, ScrapePassesPromtoolCheckMetrics) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool (Debian's prometheus package) is not installed";
  }
  auto m = MakeMetrics();
  m->OnDispatch(kF32, Selected("tiled", VerdictSource::kMeasured), 3e-4, absl::OkStatus());
  m->OnVerification(kF32, Selected("tiled", VerdictSource::kMeasured), 1e-6,
                    VerificationOutcome::kPass);
  FILE* promtool = popen("promtool check metrics >/dev/null 2>&1", "w");
  ASSERT_NE(promtool, nullptr);
  const std::string s = m->Scrape();
  fwrite(s.data(), 1, s.size(), promtool);
  EXPECT_EQ(pclose(promtool), 0) << "promtool check metrics rejected:\n" << s;
}

TEST(MetricsTest, KernelBucketsSpanOneMicrosecondToTenSecondsIncreasing) {
  const std::vector<double> b = Metrics::KernelBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 1e-6);
  EXPECT_DOUBLE_EQ(b.back(), 10);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

}  // namespace
}  // namespace arbiter::server
