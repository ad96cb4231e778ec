// arbiterd end to end on the GPU: start `arbiterd --backend cuda`, dispatch
// through the client, check C against a CPU reference, check the verdict
// raced every eligible candidate, then restart on the same store and check the
// verdict is served without measuring again. Skips (saying so) without a GPU,
// or when arbiterd is not built next to this binary.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cuda/cuda_backend.h"
#include "client/arbiter_client.h"
#include "client/matmul_check.h"

extern char** environ;

namespace arbiter::cuda {
namespace {

namespace fs = std::filesystem;

fs::path SelfDir() { return fs::read_symlink("/proc/self/exe").parent_path(); }

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One arbiterd child process; SIGTERM and reaped on destruction.
class Daemon {
 public:
  Daemon(const fs::path& binary, const fs::path& dir) : dir_(dir) {
    const fs::path port_file = dir / "port";
    fs::remove(port_file);
    log_ = dir / ("arbiterd." + std::to_string(++starts_) + ".log");
    std::vector<std::string> args = {binary.string(),
                                     "--backend=cuda",
                                     "--listen=127.0.0.1:0",
                                     "--tuning=sync",
                                     "--store=" + (dir / "verdicts.db").string(),
                                     "--port_file=" + port_file.string()};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Daemon() { Stop(); }

  // The bound port, once the daemon has written it; "" if it exited first or
  // did not start within the timeout (context creation plus cuBLAS handles take seconds).
  std::string WaitForPort(double timeout_seconds) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1e3));
    const fs::path port_file = dir_ / "port";
    while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      std::string port = ReadFile(port_file);
      while (!port.empty() && (port.back() == '\n' || port.back() == ' ')) port.pop_back();
      if (!port.empty()) return port;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a file, not ordering
    }
    return "";
  }

  // SIGTERM, then the exit status (-1 when not running).
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string Log() const { return ReadFile(log_); }

 private:
  fs::path dir_;
  fs::path log_;
  pid_t pid_ = -1;
  static inline int starts_ = 0;
};

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
  char dir_template[] = "/tmp/arbiter-cuda-daemon-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const fs::path dir = dir_template;

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
    Daemon daemon(binary, dir);
    const std::string port = daemon.WaitForPort(120);
    ASSERT_FALSE(port.empty()) << "arbiterd did not start:\n" << daemon.Log();
    client::ClientOptions options;
    options.server = "127.0.0.1:" + port;
    client::ArbiterClient client(options);
    ASSERT_TRUE(client.WaitUntilServing(60).ok()) << daemon.Log();

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
    ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon.Log();
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
    EXPECT_EQ(daemon.Stop(), 0) << daemon.Log();
  }
  {
    Daemon daemon(binary, dir);
    const std::string port = daemon.WaitForPort(120);
    ASSERT_FALSE(port.empty()) << "arbiterd did not restart:\n" << daemon.Log();
    client::ClientOptions options;
    options.server = "127.0.0.1:" + port;
    client::ArbiterClient client(options);
    ASSERT_TRUE(client.WaitUntilServing(60).ok()) << daemon.Log();
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

}  // namespace
}  // namespace arbiter::cuda
