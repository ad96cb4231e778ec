// The client library's host staging (client/host_staging.h) against a daemon
// composed in-process on the CPU backend, over a Unix socket: a bytes-path
// Matmul that goes through a registered host buffer instead of the gRPC
// messages, and falls back to bytes wherever staging cannot serve.
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "client/arbiter_client.h"
#include "client/matmul_check.h"
#include "server/daemon.h"
#include "tests/server/metrics_scrape.h"

namespace arbiter::server {
namespace {

using client::ArbiterClient;

class HostStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "arbiter-staging-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(system(("mkdir -p '" + dir_ + "'").c_str()), 0);
    address_ = "unix:" + dir_ + "/d.sock";
  }

  void Start() {
    DaemonOptions options = options_;
    options.listen = address_ + ",127.0.0.1:0";
    options.store_path = ":memory:";
    options.backend = BackendKind::kCpu;
    options.metrics_listen = "127.0.0.1:0";
    options.arbiter.tuning = TuningPolicy::kSync;
    options.arbiter.measure.cold_cache = false;  // about the path, not timing
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  // Staging from the first byte (the default threshold is for speed, not behaviour).
  std::unique_ptr<ArbiterClient> Client(bool staging = true, std::string server = "") {
    client::ClientOptions options;
    options.server = server.empty() ? address_ : server;
    options.deadline_seconds = 60;
    options.host_staging = staging;
    options.host_staging_min_bytes = 0;
    options.host_staging_threads = 3;
    return std::make_unique<ArbiterClient>(options);
  }

  // The daemon's regions labelled as staging buffers.
  std::vector<v1::Region> StagingRegions() {
    auto admin = Client(false);
    v1::ListRegionsResponse all;
    EXPECT_TRUE(admin->ListAllRegions(&all).ok());
    std::vector<v1::Region> out;
    for (const v1::Region& r : all.regions()) {
      if (r.label() == "arbiter client staging") out.push_back(r);
    }
    return out;
  }

  std::string dir_, address_;
  DaemonOptions options_;
  std::unique_ptr<Daemon> daemon_;
};

v1::MatmulRequest Request(int64_t m, int64_t n, int64_t k, uint64_t seed, client::Operands* ops) {
  v1::MatmulRequest r;
  r.mutable_problem()->set_dtype(v1::DTYPE_F32);
  r.mutable_problem()->set_m(m);
  r.mutable_problem()->set_n(n);
  r.mutable_problem()->set_k(k);
  *ops = client::RandomOperands(r.problem(), seed);
  r.set_a(ops->a);
  r.set_b(ops->b);
  return r;
}

// Every element of `c` within the default f32 budget of the reference.
::testing::AssertionResult Correct(const v1::MatmulRequest& r, const client::Operands& ops,
                                   const std::string& c) {
  client::CheckOptions all;
  all.samples = 0;
  const client::CheckResult check =
      client::CheckMatmul(r.problem(), ops, c, client::DefaultBudget(v1::DTYPE_F32), all);
  if (check.passed()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << check.failures << " of " << check.checked
                                       << " wrong: " << check.first_failure;
}

TEST_F(HostStagingTest, ABytesMatmulGoesThroughAHostBufferAndReturnsTheSameC) {
  Start();
  auto client = Client();
  client::Operands ops;
  const v1::MatmulRequest request = Request(37, 53, 19, 7, &ops);
  v1::MatmulResponse response;
  const grpc::Status s = client->Matmul(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(Correct(request, ops, response.c()));
  EXPECT_EQ(client->staged_calls(), 1);
  // The daemon saw a region-named Matmul: nothing crossed into or out of its
  // device memory (the CPU backend reads a host region in place).
  const std::vector<v1::Region> staging = StagingRegions();
  ASSERT_EQ(staging.size(), 1u) << "one staging buffer, registered by this process";
  EXPECT_EQ(staging[0].owner().pid(), getpid());
  EXPECT_EQ(staging[0].kind(), v1::REGION_KIND_HOST_MEMFD);
  const int port = daemon_->metrics_port();
  EXPECT_EQ(StageCount(Scrape(port), "kernel"), 1);
  EXPECT_EQ(StageCount(Scrape(port), "h2d"), 0) << "a host region is read in place, not copied in";

  // The same request from a client with staging off: bytes, the same C.
  auto plain = Client(false);
  v1::MatmulResponse bytes;
  ASSERT_TRUE(plain->Matmul(request, &bytes).ok());
  EXPECT_EQ(plain->staged_calls(), 0);
  EXPECT_EQ(StageCount(Scrape(port), "h2d"), 1);
  EXPECT_EQ(bytes.c(), response.c()) << "the same verdict's kernel on the same operands";
  EXPECT_EQ(bytes.candidate(), response.candidate());
}

TEST_F(HostStagingTest, MatmulIntoWritesTheCallersMemoryAndTheBufferIsReusedThenGrown) {
  Start();
  auto client = Client();
  client::Operands ops;
  v1::MatmulRequest request = Request(29, 31, 23, 3, &ops);
  std::vector<float> c(29 * 31, std::nanf(""));
  v1::MatmulResponse response;
  for (int call = 0; call < 3; ++call) {
    const grpc::Status s = client->MatmulInto(request, c.data(), c.size() * 4, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(response.c().empty());
    EXPECT_TRUE(Correct(request, ops, std::string(reinterpret_cast<char*>(c.data()), c.size() * 4)));
  }
  EXPECT_EQ(client->staged_calls(), 3);
  const std::vector<v1::Region> first = StagingRegions();
  ASSERT_EQ(first.size(), 1u) << "one buffer reused by calls one after another";

  // A larger problem: the buffer is replaced by a larger one, the old one released.
  request = Request(64, 96, 80, 5, &ops);
  ASSERT_TRUE(client->Matmul(request, &response).ok());
  EXPECT_TRUE(Correct(request, ops, response.c()));
  const std::vector<v1::Region> grown = StagingRegions();
  ASSERT_EQ(grown.size(), 1u);
  EXPECT_NE(grown[0].id(), first[0].id());
  EXPECT_GE(grown[0].bytes(), 2 * first[0].bytes());
  EXPECT_GE(grown[0].bytes(), (64 * 80 + 80 * 96 + 64 * 96) * 4);
}

TEST_F(HostStagingTest, OperandsCopiedInPartsOverSeveralThreadsArriveWhole) {
  Start();
  auto client = Client();
  // Long A and B rows (1 MiB together: parts that straddle the end of A; with
  // K odd, parts that start off B's 16-byte alignment), then a wide C (1 MiB)
  // copied out in parts.
  for (auto [m, n, k] : {std::tuple{4, 4, 32768}, std::tuple{1, 3, 65537}, std::tuple{512, 512, 2}}) {
    client::Operands ops;
    const v1::MatmulRequest request = Request(m, n, k, 17, &ops);
    v1::MatmulResponse response;
    const grpc::Status s = client->Matmul(request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(Correct(request, ops, response.c())) << m << "x" << n << "x" << k;
  }
  EXPECT_EQ(client->staged_calls(), 3);
}

TEST_F(HostStagingTest, SmallTcpMalformedEventSlotAndResidentTensorRequestsGoAsBytes) {
  Start();
  client::Operands ops;
  const v1::MatmulRequest request = Request(8, 8, 8, 1, &ops);
  v1::MatmulResponse response;

  client::ClientOptions threshold;
  threshold.server = address_;
  threshold.host_staging_min_bytes = 1 << 20;
  ArbiterClient small(threshold);
  ASSERT_TRUE(small.Matmul(request, &response).ok());
  EXPECT_TRUE(Correct(request, ops, response.c()));
  EXPECT_EQ(small.staged_calls(), 0) << "768 bytes stay under the 1 MiB default";

  // TCP: no session to stage on.
  auto tcp = Client(true, "127.0.0.1:" + std::to_string(daemon_->port()));
  ASSERT_TRUE(tcp->Matmul(request, &response).ok());
  EXPECT_TRUE(Correct(request, ops, response.c()));
  EXPECT_EQ(tcp->staged_calls(), 0);

  // A that is not m*k elements: the bytes path's refusal names it, unchanged.
  auto client = Client();
  v1::MatmulRequest wrong = request;
  wrong.set_a(ops.a.substr(4));
  const grpc::Status refused = client->Matmul(wrong, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("a"), std::string::npos) << refused.error_message();
  EXPECT_EQ(client->staged_calls(), 0);

  // Completion-event slots are the caller's session's: such a request is not staged (the
  // daemon answers it as it would any bytes-path call naming them).
  v1::MatmulRequest slots = request;
  slots.add_done_event_slots(0);
  client->Matmul(slots, &response);
  EXPECT_EQ(client->staged_calls(), 0);

  // B a resident tensor (of the client's own session): A goes as bytes beside it.
  ASSERT_TRUE(client->OpenSession().ok());
  v1::Tensor weight;
  ASSERT_TRUE(client->UploadTensor(ops.b.data(), static_cast<int64_t>(ops.b.size()), "w", &weight).ok());
  v1::MatmulRequest resident = request;
  resident.clear_b();
  resident.mutable_b_ref()->set_tensor(weight.handle());
  ASSERT_TRUE(client->Matmul(resident, &response).ok());
  EXPECT_TRUE(Correct(request, ops, response.c()));
  EXPECT_EQ(client->staged_calls(), 0);
  EXPECT_TRUE(StagingRegions().empty());
}

TEST_F(HostStagingTest, CallsFromSeveralThreadsAtOnceEachGetTheirOwnC) {
  Start();
  auto client = Client();
  constexpr int kThreads = 6, kCalls = 5;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int call = 0; call < kCalls; ++call) {
        client::Operands ops;
        // Different shapes and operands per thread: a C in the wrong buffer shows.
        const v1::MatmulRequest request = Request(16 + t, 24 + 2 * t, 12 + t, 100 * t + call, &ops);
        v1::MatmulResponse response;
        const grpc::Status s = client->Matmul(request, &response);
        if (!s.ok()) {
          failures[t] = s.error_message();
        } else if (::testing::AssertionResult r = Correct(request, ops, response.c()); !r) {
          failures[t] = r.message();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_GE(client->staged_calls(), 1);
  EXPECT_LE(StagingRegions().size(), static_cast<size_t>(client::HostStaging::kMaxBuffers));
}

TEST_F(HostStagingTest, AfterADaemonRestartTheNextCallStagesOnANewSession) {
  Start();
  auto client = Client();
  client::Operands ops;
  const v1::MatmulRequest request = Request(20, 30, 40, 11, &ops);
  v1::MatmulResponse response;
  ASSERT_TRUE(client->Matmul(request, &response).ok());
  ASSERT_EQ(client->staged_calls(), 1);

  daemon_.reset();  // the daemon goes, and with it the session and the buffer's region
  Start();
  ASSERT_TRUE(client->WaitUntilServing(30).ok());
  const grpc::Status s = client->Matmul(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(Correct(request, ops, response.c()));
  EXPECT_EQ(client->staged_calls(), 2) << "retried on a new session, still staged";
  EXPECT_EQ(StagingRegions().size(), 1u);
}

TEST_F(HostStagingTest, ACallOverTheHostMemoryQuotaGoesAsBytesAndSmallerOnesStillStage) {
  options_.arbiter.regions.max_host_bytes_per_peer = 16 << 10;
  Start();
  auto client = Client();
  client::Operands ops;
  const v1::MatmulRequest large = Request(40, 50, 60, 13, &ops);  // 29760 bytes staged: refused
  v1::MatmulResponse response;
  for (int call = 0; call < 2; ++call) {
    const grpc::Status s = client->Matmul(large, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(Correct(large, ops, response.c()));
  }
  EXPECT_EQ(client->staged_calls(), 0);
  EXPECT_TRUE(StagingRegions().empty());

  const v1::MatmulRequest small = Request(16, 24, 20, 14, &ops);  // 4736 bytes: within the quota
  ASSERT_TRUE(client->Matmul(small, &response).ok());
  EXPECT_TRUE(Correct(small, ops, response.c()));
  EXPECT_EQ(client->staged_calls(), 1) << "one refusal of a large buffer does not turn staging off";
  EXPECT_EQ(StagingRegions().size(), 1u);
}

}  // namespace
}  // namespace arbiter::server
