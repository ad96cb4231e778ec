// Sampled live verification through the composed daemon (in-process, CPU
// backend, --verify-fraction 1, over gRPC): a client's data cannot quarantine a
// correct kernel, and a wrong kernel is still caught. The real arbiterd binary
// is driven the same way by tests/integration/live_verification_integration_test.cc.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/arbiter_client.h"
#include "server/daemon.h"
#include "tests/kernels/registry/planted_candidates.h"

namespace arbiter::server {
namespace {

constexpr int64_t kDim = 48;

class LiveVerificationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonOptions options;
    options.listen = "127.0.0.1:0";
    options.store_path = ":memory:";
    options.backend = BackendKind::kCpu;
    options.arbiter.tuning = TuningPolicy::kOff;
    options.arbiter.verify_fraction = 1;
    options.extra_candidates.push_back(testing::MakePlantedSkipKCandidate());
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    client::ClientOptions client_options;
    client_options.server = "127.0.0.1:" + std::to_string(daemon_->port());
    client_options.deadline_seconds = 120;
    client_ = std::make_unique<client::ArbiterClient>(client_options);
  }

  static v1::Problem Square() {
    v1::Problem p;
    p.set_dtype(v1::DTYPE_F32);
    p.set_m(kDim);
    p.set_n(kDim);
    p.set_k(kDim);
    return p;
  }

  // f32 operands of Square(), every element of A `a` and of B `b`.
  grpc::Status Matmul(float a, float b) {
    std::vector<float> av(kDim * kDim, a), bv(kDim * kDim, b);
    v1::MatmulRequest request;
    *request.mutable_problem() = Square();
    request.set_a(av.data(), av.size() * sizeof(float));
    request.set_b(bv.data(), bv.size() * sizeof(float));
    v1::MatmulResponse response;
    return client_->Matmul(request, &response);
  }

  // Quarantine entries naming `candidate` (any candidate when empty).
  int Quarantined(const std::string& candidate = "") {
    v1::ListQuarantineResponse list;
    EXPECT_TRUE(client_->ListQuarantine(&list).ok());
    int n = 0;
    for (const auto& e : list.entries()) n += candidate.empty() || e.candidate() == candidate;
    return n;
  }

  void ForcePlanted() {
    v1::ForceRequest force;
    *force.mutable_problem() = Square();
    force.set_candidate("planted_skip_k");
    force.set_reason("serve the planted wrong kernel");
    v1::ForceResponse forced;
    ASSERT_TRUE(client_->Force(force, &forced).ok());
  }

  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<client::ArbiterClient> client_;
};

TEST_F(LiveVerificationTest, NaNOperandsQuarantineNothing) {
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(Matmul(std::nanf(""), 1.0f).ok());
  EXPECT_EQ(Quarantined(), 0);
}

TEST_F(LiveVerificationTest, FiniteOperandsWhoseProductOverflowsQuarantineNothing) {
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(Matmul(1e30f, 1e30f).ok());
  EXPECT_EQ(Quarantined(), 0);
}

TEST_F(LiveVerificationTest, APlantedWrongKernelIsStillQuarantinedForItsBucket) {
  ForcePlanted();
  // Ordinary operands: planted_skip_k leaves the last K element out of every dot product.
  EXPECT_TRUE(Matmul(0.5f, 0.25f).ok());  // the client still gets the answer it asked for
  EXPECT_EQ(Quarantined("planted_skip_k"), 1);
  v1::ListQuarantineResponse list;
  ASSERT_TRUE(client_->ListQuarantine(&list).ok());
  ASSERT_EQ(list.entries_size(), 1);
  EXPECT_NE(list.entries(0).reason().find("on the daemon's own"), std::string::npos)
      << list.entries(0).reason();
}

TEST_F(LiveVerificationTest, APlantedWrongKernelIsNotJudgedOnNaNOperands) {
  ForcePlanted();
  EXPECT_TRUE(Matmul(std::nanf(""), 1.0f).ok());
  EXPECT_EQ(Quarantined(), 0);  // nothing to judge it on; the next ordinary sample will
  EXPECT_TRUE(Matmul(0.5f, 0.25f).ok());
  EXPECT_EQ(Quarantined("planted_skip_k"), 1);
}

}  // namespace
}  // namespace arbiter::server
