// The real arbiterd with every dispatch verified (--verify-fraction 1): no
// client, with no token and whatever operands, can quarantine a correct kernel.
// (A planted wrong kernel is still caught: tests/server/live_verification_test.cc,
// which can register one.)
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/daemon_fixture.h"

namespace arbiter::testing {
namespace {

constexpr int64_t kDim = 48;

class LiveVerificationIntegrationTest : public DaemonFixture {
 protected:
  void SetUp() override {
    extra_args_ = {"--verify-fraction=1", "--tuning=off"};
    DaemonFixture::SetUp();
  }

  // An f32 48x48x48 Matmul with A and B as given (row-major).
  grpc::Status Matmul(const std::vector<float>& a, const std::vector<float>& b) {
    v1::MatmulRequest request;
    *request.mutable_problem() = MakeProblem(v1::DTYPE_F32, kDim, kDim, kDim);
    request.set_a(a.data(), a.size() * sizeof(float));
    request.set_b(b.data(), b.size() * sizeof(float));
    v1::MatmulResponse response;
    return client_->Matmul(request, &response);
  }
  static std::vector<float> Filled(float v) { return std::vector<float>(kDim * kDim, v); }

  int QuarantineEntries() {
    v1::ListQuarantineResponse list;
    EXPECT_TRUE(client_->ListQuarantine(&list).ok());
    return list.entries_size();
  }
};

TEST_F(LiveVerificationIntegrationTest, NaNOperandsQuarantineNothing) {
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(Matmul(Filled(std::nanf("")), Filled(1)).ok());
  EXPECT_EQ(QuarantineEntries(), 0) << daemon_->ReadLog();
}

TEST_F(LiveVerificationIntegrationTest, FiniteOperandsWhoseProductOverflowsQuarantineNothing) {
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(Matmul(Filled(1e30f), Filled(1e30f)).ok());
  EXPECT_EQ(QuarantineEntries(), 0) << daemon_->ReadLog();
}

// Rows of +3e38 then -3e38: the exact product is 0, but any f32 accumulation
// overflows on the way. The kernel is not at fault, and its check on the
// daemon's own operands says so.
TEST_F(LiveVerificationIntegrationTest, OperandsThatOverflowOnlyInPartialSumsQuarantineNothing) {
  std::vector<float> a(kDim * kDim);
  for (int64_t i = 0; i < kDim; ++i)
    for (int64_t k = 0; k < kDim; ++k) a[i * kDim + k] = k < kDim / 2 ? 3e38f : -3e38f;
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(Matmul(a, Filled(1)).ok());
  EXPECT_EQ(QuarantineEntries(), 0) << daemon_->ReadLog();
  // The restarted daemon reads the store: still nothing quarantined.
  StopDaemon();
  StartDaemon();
  EXPECT_EQ(QuarantineEntries(), 0);
}

}  // namespace
}  // namespace arbiter::testing
