// The fault tests' fixture: starts arbiterd_faults (arbiterd plus the planted
// candidates of planted.h) on a temporary store, plays its supervisor and checks
// what a restart quarantined (arbiterd_faults_test.cc on the CPU backend,
// arbiterd_faults_gpu_test.cc on CUDA).
//
// Not thread-safe: one test at a time per fixture.
#pragma once

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/daemon_fixture.h"

namespace arbiter::testing {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Polls `condition` (a file another process writes) for at most `seconds`.
inline bool Eventually(const std::function<bool()>& condition, double seconds = 60) {
  const auto limit = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
  while (!condition()) {
    if (Clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // between checks
  }
  return true;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class FaultsTest : public DaemonFixture {
 protected:
  void SetUp() override {
    store_dir_ = MakeTempDir("arbiter-faults-");
    ASSERT_FALSE(store_dir_.empty());
    store_path_ = store_dir_ + "/verdicts.db";
  }

  std::string backend_ = "cpu";                   // --backend of arbiterd_faults
  std::string binary_ = ARBITERD_FAULTS_PATH;     // the arbiterd_faults started

  // (Re)starts arbiterd_faults on the fixture's store.
  void StartFaults(std::vector<std::string> args = {}) {
    ArbiterdOptions options;
    options.binary = binary_;
    options.store_path = store_path_;
    options.backend = backend_;
    options.extra_args = std::move(args);
    std::string error;
    daemon_ = ArbiterdProcess::Start(options, &error);
    ASSERT_NE(daemon_, nullptr) << error;
    client::ClientOptions client_options;
    client_options.server = daemon_->address();
    client_options.deadline_seconds = 120;
    client_ = std::make_unique<client::ArbiterClient>(client_options);
  }

  grpc::Status Select(int64_t m, v1::SelectResponse* response) {
    v1::SelectRequest request;
    *request.mutable_problem() = MakeProblem(v1::DTYPE_F32, m, 8, 8);
    return client_->Select(request, response);
  }

  std::vector<v1::QuarantineEntry> Quarantined() {
    v1::ListQuarantineResponse response;
    grpc::Status s = client_->ListQuarantine(&response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {response.entries().begin(), response.entries().end()};
  }

  // Selecting a problem at `m` takes the daemon down; it exits with `exit_status`
  // (128+signal for a signal). Then, restarted as a supervisor would: `candidate`
  // is quarantined for that bucket alone with a reason containing `reason`, and the
  // bucket and another one are served.
  void DiesThenQuarantines(int64_t m, const std::string& candidate, int exit_status,
                           const std::string& reason, std::vector<std::string> args = {}) {
    StartFaults(args);
    v1::SelectResponse lost;
    const grpc::Status s = Select(m, &lost);
    EXPECT_FALSE(s.ok()) << "measuring " << candidate << " at M=" << m << " answered";
    EXPECT_EQ(daemon_->WaitExit(60), exit_status) << daemon_->ReadLog();

    StartFaults(args);  // the supervisor's restart
    const std::vector<v1::QuarantineEntry> q = Quarantined();
    ASSERT_EQ(q.size(), 1u) << daemon_->ReadLog();
    EXPECT_EQ(q[0].candidate(), candidate);
    EXPECT_NE(q[0].reason().find(reason), std::string::npos) << q[0].reason();
    EXPECT_NE(q[0].reason().find("f32 " + std::to_string(m) + "x8x8"), std::string::npos)
        << q[0].reason();

    v1::SelectResponse same;
    const grpc::Status served = Select(m, &same);
    ASSERT_TRUE(served.ok()) << served.error_message() << "\n" << daemon_->ReadLog();
    EXPECT_EQ(q[0].scope(), "f32/" + same.bucket());  // that bucket only
    EXPECT_EQ(same.source(), v1::VERDICT_SOURCE_MEASURED);
    for (const v1::CandidateResult& r : same.verdict().results()) EXPECT_NE(r.name(), candidate);

    v1::SelectResponse other;
    const grpc::Status other_served = Select(16, &other);
    ASSERT_TRUE(other_served.ok()) << other_served.error_message() << "\n" << daemon_->ReadLog();
    EXPECT_EQ(other.source(), v1::VERDICT_SOURCE_MEASURED);
    bool raced = false;
    for (const v1::CandidateResult& r : other.verdict().results()) raced |= r.name() == candidate;
    EXPECT_TRUE(raced) << candidate << " was not measured in another bucket";

    client_.reset();
    EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->ReadLog();
  }
};

}  // namespace arbiter::testing
