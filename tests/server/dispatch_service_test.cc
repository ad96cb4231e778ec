#include "server/dispatch_service.h"

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

TEST(DispatchServiceTest, OperandSizeErrorNamesTheExpectedBytesAndHowTheyWereComputed) {
  const Problem p{DType::kF32, 64, 32, 16};
  EXPECT_TRUE(CheckOperandBytes("a", p, 64 * 16 * 4).ok());
  const absl::Status a = CheckOperandBytes("a", p, 100);
  EXPECT_EQ(a.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.message().find("a: expected 4096 bytes (m*k*size = 64*16*4"), std::string::npos)
      << a.message();
  EXPECT_NE(a.message().find("got 100"), std::string::npos) << a.message();

  const absl::Status b = CheckOperandBytes("b", Problem{DType::kBF16, 3, 5, 7}, 0);
  EXPECT_NE(b.message().find("b: expected 70 bytes (k*n*size = 7*5*2"), std::string::npos)
      << b.message();
}

}  // namespace
}  // namespace arbiter::server
