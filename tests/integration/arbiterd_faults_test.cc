// Faults of candidates, on the real daemon: arbiterd_faults (arbiterd plus the
// planted candidates of faults/planted.h) is measured into a crash, an abort or
// a hang; the test plays the supervisor - it sees the process end, restarts it
// on the same store - and checks the candidate ends quarantined with the reason
// while every bucket, the faulting one included, is served. And SIGTERM: with
// nothing in flight the daemon exits at once, not after --shutdown-grace-seconds;
// with a long measurement in flight it exits within the grace.
#include <signal.h>

#include <chrono>
#include <future>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tests/integration/faults/faults_fixture.h"
#include "tests/integration/faults/planted.h"

namespace arbiter::testing {
namespace {

TEST_F(FaultsTest, ACandidateThatSegfaultsIsQuarantinedForItsBucketOnRestart) {
  DiesThenQuarantines(kCrashM, "planted_crash", 128 + SIGSEGV, "died while measuring it");
}

TEST_F(FaultsTest, ACandidateThatAbortsIsQuarantinedForItsBucketOnRestart) {
  DiesThenQuarantines(kAbortM, "planted_crash", 128 + SIGABRT, "died while measuring it");
}

TEST_F(FaultsTest, AHungCandidateEndsTheDaemonByTheWatchdogAndIsQuarantinedOnRestart) {
  // 10 s: far above any step of the healthy candidates, even on a loaded machine.
  DiesThenQuarantines(kHangM, "planted_hang", /*kExitCandidateFault=*/3, "hung: no progress",
                      {"--tuning-hang-seconds=10"});
}

TEST_F(FaultsTest, SigtermWithNothingInFlightExitsWithoutWaitingOutTheGrace) {
  StartFaults({"--shutdown-grace-seconds=120"});
  v1::SelectResponse served;
  ASSERT_TRUE(Select(16, &served).ok());
  // An open connection left idle, and a call on it whose deadline had already passed
  // (a deadline of a microsecond from now, as before, is a race: under load the call
  // sometimes completed first). Neither may hold the shutdown.
  auto idle = grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(idle->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(60)));
  grpc::ClientContext expired;
  expired.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
  v1::SelectRequest request;
  *request.mutable_problem() = MakeProblem(v1::DTYPE_F32, 16, 8, 8);
  v1::SelectResponse unused;
  EXPECT_EQ(v1::Dispatch::NewStub(idle)->Select(&expired, request, &unused).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);

  const auto t0 = Clock::now();
  EXPECT_EQ(daemon_->Terminate(/*timeout_seconds=*/120), 0) << daemon_->ReadLog();
  const double took = SecondsSince(t0);
  // A behaviour bound, far from the grace: it did not wait for it.
  EXPECT_LT(took, 30) << daemon_->ReadLog();
  RecordProperty("sigterm_to_exit_idle_seconds", std::to_string(took));
}

TEST_F(FaultsTest, SigtermDuringALongMeasurementExitsWithinTheGrace) {
  constexpr double kGrace = 2;
  StartFaults({"--shutdown-grace-seconds=2"});
  // planted_slow takes 3 s a run at this shape: measuring it takes well over 20 s.
  auto measuring = std::async(std::launch::async, [this] {
    v1::SelectResponse response;
    return Select(kSlowM, &response);
  });
  const std::string intent = store_path_ + ".intent";
  ASSERT_TRUE(Eventually([&] {
    return ReadFile(intent).find("candidate=planted_slow") != std::string::npos;
  })) << daemon_->ReadLog();

  const auto t0 = Clock::now();
  EXPECT_EQ(daemon_->Terminate(/*timeout_seconds=*/60), 0) << daemon_->ReadLog();
  const double took = SecondsSince(t0);
  EXPECT_LT(took, kGrace + 10) << daemon_->ReadLog();  // generous: a bound, not a speed
  RecordProperty("sigterm_to_exit_measuring_seconds", std::to_string(took));
  EXPECT_FALSE(measuring.get().ok());
  // Stopped by the shutdown, not by a fault: nothing is blamed on the next start.
  StartFaults();
  EXPECT_TRUE(Quarantined().empty());
}

}  // namespace
}  // namespace arbiter::testing
