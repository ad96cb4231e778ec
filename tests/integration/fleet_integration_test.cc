// Real arbiterd processes (--backend cpu) on one real PostgreSQL server started
// by the test: what a fleet relies on when a daemon or the store fails - a
// lease holder killed with SIGKILL leaves its bucket to another daemon; the
// store stopped and restarted under load loses nothing acknowledged.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/arbiter_client.h"
#include "tests/engine/postgres_server.h"
#include "tests/integration/arbiterd_process.h"
#include "tests/integration/daemon_fixture.h"

namespace arbiter::testing {
namespace {

// Polls `condition` until it holds or 60 s pass (a daemon process reacting to
// another one or to the store: nothing to wait on but its answers).
bool Eventually(const std::function<bool()>& condition) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // between checks
  }
  return true;
}

class FleetIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    server_ = SharedPostgresServer(&why);
    if (server_ == nullptr) GTEST_SKIP() << why;
    absl::StatusOr<std::string> database = server_->CreateDatabase();
    ASSERT_TRUE(database.ok()) << database.status();
    uri_ = server_->Uri(*database);
  }

  void TearDown() override {
    clients_.clear();
    daemons_.clear();
    if (server_ != nullptr && !server_->running()) {
      absl::Status restarted = server_->Restart();
      EXPECT_TRUE(restarted.ok()) << restarted;
    }
  }

  // Starts a daemon on the shared store; returns its index.
  size_t Start(const std::string& tuning) {
    ArbiterdOptions options;
    options.binary = ARBITERD_PATH;
    options.store_path = uri_;
    options.tuning = tuning;
    options.extra_args = {"--store-password-file=" + server_->password_file()};
    std::string error;
    std::unique_ptr<ArbiterdProcess> d = ArbiterdProcess::Start(options, &error);
    EXPECT_NE(d, nullptr) << error;
    if (d == nullptr) return 0;
    client::ClientOptions client_options;
    client_options.server = d->address();
    client_options.deadline_seconds = 120;
    clients_.push_back(std::make_unique<client::ArbiterClient>(client_options));
    daemons_.push_back(std::move(d));
    return daemons_.size() - 1;
  }

  grpc::Status Select(size_t d, const v1::Problem& p, v1::SelectResponse* response) {
    v1::SelectRequest request;
    *request.mutable_problem() = p;
    return clients_[d]->Select(request, response);
  }
  v1::VerdictSource SourceOf(size_t d, const v1::Problem& p) {
    v1::SelectResponse response;
    grpc::Status s = Select(d, p, &response);
    return s.ok() ? response.source() : v1::VERDICT_SOURCE_UNSPECIFIED;
  }
  grpc::Status Force(size_t d, const v1::Problem& p, const std::string& candidate) {
    v1::ForceRequest request;
    *request.mutable_problem() = p;
    request.set_candidate(candidate);
    request.set_reason("fleet test");
    v1::ForceResponse response;
    return clients_[d]->Force(request, &response);
  }
  int64_t Measurements(size_t d) {
    v1::ServerInfoResponse info;
    grpc::Status s = clients_[d]->ServerInfo(&info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info.measurements();
  }
  bool LogHas(size_t d, const std::string& text) {
    return daemons_[d]->ReadLog().find(text) != std::string::npos;
  }

  PostgresServer* server_ = nullptr;
  std::string uri_;
  std::vector<std::unique_ptr<ArbiterdProcess>> daemons_;
  std::vector<std::unique_ptr<client::ArbiterClient>> clients_;
};

TEST_F(FleetIntegrationTest, ALeaseHolderKilledMidMeasurementLeavesTheBucketToAnother) {
  const size_t a = Start("sync");
  const size_t b = Start("sync");
  ASSERT_EQ(daemons_.size(), 2u);
  // Large enough that measuring it on the CPU takes a while (the reference kernel races too).
  const v1::Problem p = MakeProblem(v1::DTYPE_F64, 320, 320, 320);
  const std::string measuring = "measuring f64 320x320x320";

  auto first = std::async(std::launch::async, [&] {
    v1::SelectResponse ignored;
    return Select(a, p, &ignored);  // fails once a is killed
  });
  ASSERT_TRUE(Eventually([&] { return LogHas(a, measuring); })) << daemons_[a]->ReadLog();
  auto second = std::async(std::launch::async, [&] {
    v1::SelectResponse response;
    grpc::Status s = Select(b, p, &response);
    return std::make_pair(s, response);
  });
  ASSERT_TRUE(Eventually([&] { return LogHas(b, "being measured by another daemon"); }))
      << daemons_[b]->ReadLog();
  ASSERT_FALSE(LogHas(a, "verdict f64")) << "a finished before the kill: pick a larger shape";
  ASSERT_EQ(kill(daemons_[a]->pid(), SIGKILL), 0);
  first.wait();

  auto [status, response] = second.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.source(), v1::VERDICT_SOURCE_MEASURED);
  EXPECT_EQ(Measurements(b), 1);  // b took the dead holder's lease and measured
}

TEST_F(FleetIntegrationTest, StoreStoppedAndRestartedUnderLoadLosesNothingAcknowledged) {
  const size_t a = Start("sync");
  const size_t b = Start("off");
  ASSERT_EQ(daemons_.size(), 2u);
  const v1::Problem tuned = MakeProblem(v1::DTYPE_F32, 48, 48, 48);
  const v1::Problem forced = MakeProblem(v1::DTYPE_F32, 200, 200, 200);
  const v1::Problem during = MakeProblem(v1::DTYPE_F32, 100, 100, 100);
  const v1::Problem refused = MakeProblem(v1::DTYPE_F32, 20, 20, 20);
  ASSERT_EQ(SourceOf(a, tuned), v1::VERDICT_SOURCE_MEASURED);
  ASSERT_TRUE(Force(a, forced, "cpu_reference").ok());
  ASSERT_TRUE(Eventually([&] {
    return SourceOf(b, tuned) == v1::VERDICT_SOURCE_MEASURED &&
           SourceOf(b, forced) == v1::VERDICT_SOURCE_FORCED;
  }));

  // Load on both daemons all along: every selection is answered, as before.
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, failed{0};
  std::vector<std::string> failures;  // the first few, for the failure message
  std::thread load([&] {
    while (!stop) {
      for (size_t d : {a, b}) {
        for (const auto& [p, want] : {std::pair{tuned, v1::VERDICT_SOURCE_MEASURED},
                                      std::pair{forced, v1::VERDICT_SOURCE_FORCED}}) {
          v1::SelectResponse r;
          const grpc::Status s = Select(d, p, &r);
          if (s.ok() && r.source() == want) {
            ++answered;
            continue;
          }
          if (++failed <= 5) {
            failures.push_back(absl::StrCat(
                "daemon ", d, " ", p.m(), "x", p.n(), "x", p.k(), ": ",
                s.ok() ? absl::StrCat("source ", v1::VerdictSource_Name(r.source()), " (",
                                      r.reason(), ")")
                       : s.error_message()));
          }
        }
      }
    }
  });

  ASSERT_TRUE(server_->Stop().ok());
  const int answered_before_outage = answered.load();
  // An admin change that cannot be made durable is refused, not acknowledged.
  const grpc::Status refused_force = Force(a, refused, "cpu_reference");
  EXPECT_EQ(refused_force.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused_force.error_message();
  // A miss is measured locally (a's policy is sync) and served.
  EXPECT_EQ(SourceOf(a, during), v1::VERDICT_SOURCE_MEASURED);
  EXPECT_TRUE(Eventually([&] { return answered.load() > answered_before_outage + 4; }));

  ASSERT_TRUE(server_->Restart().ok());
  // What a measured while the store was down reaches the store, so b serves it.
  EXPECT_TRUE(Eventually([&] { return SourceOf(b, during) == v1::VERDICT_SOURCE_MEASURED; }));
  // Notifications flow again: a new force through a reaches b.
  ASSERT_TRUE(Eventually([&] { return Force(a, refused, "cpu_reference").ok(); }));
  EXPECT_TRUE(Eventually([&] { return SourceOf(b, refused) == v1::VERDICT_SOURCE_FORCED; }));
  stop = true;
  load.join();
  EXPECT_EQ(failed.load(), 0) << "of " << answered.load() + failed.load() << " selections; first: "
                              << absl::StrJoin(failures, "; ");
  // The force acknowledged before the outage is still in the store.
  v1::ListVerdictsResponse listed;
  ASSERT_TRUE(clients_[b]->ListVerdicts(v1::ListVerdictsRequest(), &listed).ok());
  bool kept = false;
  for (const v1::Force& f : listed.forces()) kept |= f.candidate() == "cpu_reference";
  EXPECT_TRUE(kept);
  EXPECT_EQ(listed.forces_size(), 2);
}

}  // namespace
}  // namespace arbiter::testing
