// arbiterd end to end on the GPU: start `arbiterd --backend cuda`, dispatch
// through the client, check C against a CPU reference, check the verdict
// raced every eligible candidate, then restart on the same store and check the
// verdict is served without measuring again; and the bytes path's C, call after
// call, through reused page-locked reply buffers. Skips (saying so) without a GPU,
// or when arbiterd is not built next to this binary.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "backends/cuda/cuda_backend.h"
#include "client/arbiter_client.h"
#include "client/matmul_check.h"
#include "tests/integration/arbiterd_process.h"

namespace arbiter::cuda {
namespace {

namespace fs = std::filesystem;

fs::path SelfDir() { return fs::read_symlink("/proc/self/exe").parent_path(); }

// arbiterd --backend cuda on `store`, SERVING; null (the failure recorded, with the log) if it does not come up.
std::unique_ptr<testing::ArbiterdProcess> StartDaemon(const fs::path& binary, const fs::path& store) {
  testing::ArbiterdOptions options;
  options.binary = binary.string();
  options.store_path = store.string();
  options.backend = "cuda";
  options.start_timeout_seconds = 120;  // context creation plus cuBLAS handles take seconds
  std::string error;
  std::unique_ptr<testing::ArbiterdProcess> daemon = testing::ArbiterdProcess::Start(options, &error);
  EXPECT_NE(daemon, nullptr) << "arbiterd did not start: " << error;
  return daemon;
}

v1::Problem MakeProblem(v1::DType dtype, int64_t m, int64_t n, int64_t k) {
  v1::Problem p;
  p.set_dtype(dtype);
  p.set_m(m);
  p.set_n(n);
  p.set_k(k);
  return p;
}

// Whether a declared coverage admits the problem (the rule of engine/contract.h).
bool Covers(const v1::ShapeCoverage& s, const v1::Problem& p) {
  auto in = [](int64_t v, int64_t lo, int64_t hi, int64_t align) {
    return v >= lo && v <= hi && (align <= 1 || v % align == 0);
  };
  return in(p.m(), s.min_m(), s.max_m(), s.align_m()) &&
         in(p.n(), s.min_n(), s.max_n(), s.align_n()) &&
         in(p.k(), s.min_k(), s.max_k(), s.align_k());
}

// The f16 budget the winner declared (the daemon checked it against that one).
v1::AccuracyBudget WinnerBudget(const v1::ListCandidatesResponse& candidates,
                                const std::string& winner) {
  for (const v1::CandidateInfo& c : candidates.candidates()) {
    if (c.name() != winner) continue;
    for (const v1::MemberContract& m : c.members()) {
      if (m.dtype() == v1::DTYPE_F16) return m.accuracy();
    }
  }
  ADD_FAILURE() << "winner " << winner << " is not a listed f16 candidate";
  return client::DefaultBudget(v1::DTYPE_F16);
}

TEST(CudaDaemonTest, ServesMeasuredVerdictsOnTheGpuAndKeepsThemAcrossRestart) {
  if (CudaBackend::VisibleDevices() == 0) {
    GTEST_SKIP() << "no CUDA device visible: GPU test skipped, not passed";
  }
  const fs::path binary = SelfDir() / "arbiterd";
  if (!fs::exists(binary)) GTEST_SKIP() << "arbiterd not found next to this test at " << binary;
  const fs::path dir = testing::MakeTempDir("arbiter-cuda-daemon-");
  ASSERT_FALSE(dir.empty());
  const fs::path store = dir / "verdicts.db";

  const v1::Problem problem = MakeProblem(v1::DTYPE_F16, 777, 333, 2049);
  const client::Operands ops = client::RandomOperands(problem, 42);
  v1::MatmulRequest request;
  *request.mutable_problem() = problem;
  request.set_a(ops.a);
  request.set_b(ops.b);
  client::CheckOptions check;
  check.samples = 0;  // every element

  std::string winner;
  v1::AccuracyBudget budget;
  {
    std::unique_ptr<testing::ArbiterdProcess> daemon = StartDaemon(binary, store);
    ASSERT_NE(daemon, nullptr);
    client::ClientOptions options;
    options.server = daemon->address();
    client::ArbiterClient client(options);

    v1::ServerInfoResponse info;
    ASSERT_TRUE(client.ServerInfo(&info).ok());
    EXPECT_EQ(info.backend(), "cuda");
    EXPECT_FALSE(info.device_name().empty());
    EXPECT_EQ(info.arch().rfind("sm_", 0), 0u) << info.arch();
    EXPECT_EQ(info.measurements(), 0);
    std::printf("DAEMON device %s %s fingerprint %s candidates %d\n", info.device_name().c_str(),
                info.arch().c_str(), info.fingerprint().c_str(), info.candidates());

    v1::MatmulResponse response;
    grpc::Status s = client.Matmul(request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon->ReadLog();
    EXPECT_EQ(response.source(), v1::VERDICT_SOURCE_MEASURED);
    EXPECT_GT(response.device_seconds(), 0);
    winner = response.candidate();
    v1::ListCandidatesResponse candidates;
    ASSERT_TRUE(client.ListCandidates(&candidates).ok());
    budget = WinnerBudget(candidates, winner);
    const client::CheckResult result = client::CheckMatmul(problem, ops, response.c(), budget, check);
    EXPECT_TRUE(result.passed()) << winner << ": " << result.first_failure;
    std::printf("DAEMON first dispatch %s served by %s in %.1f us (device), bucket %s\n",
                "f16 777x333x2049", winner.c_str(), response.device_seconds() * 1e6,
                response.bucket().c_str());

    // The verdict accounts for every eligible candidate: timed, or unmeasured with a reason.
    v1::ListVerdictsRequest vreq;
    vreq.set_dtype(v1::DTYPE_F16);
    v1::ListVerdictsResponse verdicts;
    ASSERT_TRUE(client.ListVerdicts(vreq, &verdicts).ok());
    ASSERT_EQ(verdicts.verdicts_size(), 1);
    const v1::Verdict& verdict = verdicts.verdicts(0);
    EXPECT_EQ(verdict.winner(), winner);
    std::set<std::string> raced;
    for (const v1::CandidateResult& r : verdict.results()) {
      raced.insert(r.name());
      EXPECT_TRUE(r.state() == "timed" || !r.reason().empty())
          << r.name() << " is " << r.state() << " without a reason";
      std::printf("DAEMON result %-16s %-14s median %9.2f us spread %.3f max_rel %.2e %s\n",
                  r.name().c_str(), r.state().c_str(), r.median_seconds() * 1e6, r.spread(),
                  r.max_rel_error(), r.reason().c_str());
    }
    for (const v1::CandidateInfo& c : candidates.candidates()) {
      bool covers = false;  // an f16 member whose coverage admits the problem
      for (const auto& m : c.members()) {
        covers |= m.dtype() == v1::DTYPE_F16 && Covers(m.shape(), problem);
      }
      if (c.eligible() && covers) {
        EXPECT_TRUE(raced.count(c.name())) << c.name() << " covers " << problem.ShortDebugString()
                                           << " but was not raced";
      }
      if (!c.eligible()) {
        std::printf("DAEMON ineligible %s: %s\n", c.name().c_str(), c.ineligible_reason().c_str());
      }
    }
    ASSERT_TRUE(client.ServerInfo(&info).ok());
    EXPECT_GE(info.measurements(), 1);
    EXPECT_EQ(daemon->Terminate(), 0) << daemon->ReadLog();
  }
  {
    std::unique_ptr<testing::ArbiterdProcess> daemon = StartDaemon(binary, store);
    ASSERT_NE(daemon, nullptr);
    client::ClientOptions options;
    options.server = daemon->address();
    client::ArbiterClient client(options);
    v1::MatmulResponse response;
    grpc::Status s = client.Matmul(request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.candidate(), winner) << "the stored verdict should serve after restart";
    EXPECT_EQ(response.source(), v1::VERDICT_SOURCE_MEASURED);
    const client::CheckResult result = client::CheckMatmul(problem, ops, response.c(), budget, check);
    EXPECT_TRUE(result.passed()) << result.first_failure;
    v1::ServerInfoResponse info;
    ASSERT_TRUE(client.ServerInfo(&info).ok());
    EXPECT_EQ(info.measurements(), 0) << "the restarted daemon measured again";
  }
  fs::remove_all(dir);
}

// The bytes path end to end: A and B gathered from the request's slices in
// several staging chunks, C copied by DMA into a page-locked reply buffer that
// the next call reuses. Each call's C is checked in full against the
// reference, so a reused buffer still holding the last call's C would fail.
TEST(CudaDaemonTest, MatmulRepliesCarryEveryElementOfCCallAfterCall) {
  if (CudaBackend::VisibleDevices() == 0) {
    GTEST_SKIP() << "no CUDA device visible: GPU test skipped, not passed";
  }
  const fs::path binary = SelfDir() / "arbiterd";
  if (!fs::exists(binary)) GTEST_SKIP() << "arbiterd not found next to this test at " << binary;
  const fs::path dir = testing::MakeTempDir("arbiter-cuda-reply-");
  ASSERT_FALSE(dir.empty());
  std::unique_ptr<testing::ArbiterdProcess> daemon = StartDaemon(binary, dir / "verdicts.db");
  ASSERT_NE(daemon, nullptr);
  client::ClientOptions options;
  options.server = daemon->address();
  client::ArbiterClient client(options);
  v1::ListCandidatesResponse candidates;
  ASSERT_TRUE(client.ListCandidates(&candidates).ok());

  // A (4.5 MB) and C (5.3 MB) each span two 4 MiB chunks; ragged, non-square.
  const v1::Problem problem = MakeProblem(v1::DTYPE_F16, 2053, 1297, 1100);
  client::CheckOptions check;
  check.samples = 0;  // every element
  for (uint64_t seed : {5, 6, 7}) {
    SCOPED_TRACE(::testing::Message() << "operands of seed " << seed);
    const client::Operands ops = client::RandomOperands(problem, seed);
    v1::MatmulRequest request;
    *request.mutable_problem() = problem;
    request.set_a(ops.a);
    request.set_b(ops.b);
    v1::MatmulResponse response;
    const grpc::Status s = client.Matmul(request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon->ReadLog();
    ASSERT_EQ(response.c().size(), size_t{2053} * 1297 * 2);
    const client::CheckResult result = client::CheckMatmul(
        problem, ops, response.c(), WinnerBudget(candidates, response.candidate()), check);
    EXPECT_TRUE(result.passed()) << response.candidate() << ": " << result.first_failure;
  }
  EXPECT_EQ(daemon->Terminate(), 0) << daemon->ReadLog();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace arbiter::cuda
