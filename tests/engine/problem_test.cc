// Problem limits: a dimension is bounded by the bytes of its operands, never by
// a fixed cap; byte counts are computed without overflow; each refusal names
// the operand, its bytes and the limit it exceeded.
#include "engine/problem.h"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace arbiter {
namespace {

ProblemLimits Limits(int64_t operand, int64_t device = 0) {
  ProblemLimits l;
  l.max_operand_bytes = operand;
  l.max_device_bytes = device;
  return l;
}

TEST(ProblemLimitsTest, VocabularyProjectionsAreAcceptedWhereTheirBytesFit) {
  // LM heads: N is the vocabulary (128256, 152064, 256000), far past 65536.
  for (int64_t n : {128256, 152064, 256000}) {
    EXPECT_TRUE(ValidateProblem(Problem{DType::kBF16, 16, n, 4096}, ProblemLimits{}).ok()) << n;
    EXPECT_TRUE(ValidateProblem(Problem{DType::kF32, 1, n, 64}, ProblemLimits{}).ok()) << n;
  }
  // One long dimension with a short partner: 2^24 rows of one column.
  EXPECT_TRUE(ValidateProblem(Problem{DType::kF32, int64_t{1} << 24, 1, 1}, ProblemLimits{}).ok());
}

TEST(ProblemLimitsTest, DimensionBelowOneIsInvalidArgumentNamingIt) {
  for (const Problem& p : {Problem{DType::kF32, 0, 8, 8}, Problem{DType::kF32, 8, -1, 8},
                           Problem{DType::kF32, 8, 8, 0}}) {
    const absl::Status s = ValidateProblem(p, ProblemLimits{});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << p;
    EXPECT_NE(s.message().find("expected >= 1"), std::string::npos) << s.message();
  }
}

TEST(ProblemLimitsTest, ByteCountsThatOverflowAreInvalidArgumentNotWrappedAround) {
  // 2^40 * 2^40 elements wraps a signed 64-bit product; (2^62)*4 bytes wraps too.
  const int64_t big = int64_t{1} << 40;
  const absl::Status s = ValidateProblem(Problem{DType::kF32, big, 8, big}, ProblemLimits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("a (m*k)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("overflow"), std::string::npos) << s.message();
  EXPECT_FALSE(OperandBytes(int64_t{1} << 62, 1, DType::kF32).has_value());
  EXPECT_EQ(OperandBytes(3, 5, DType::kBF16), 30);
}

TEST(ProblemLimitsTest, AnOperandOverTheByteLimitIsRefusedNamingOperandBytesAndLimit) {
  // B is 64 x 1024 f32 = 262144 bytes against a 65536-byte limit.
  const absl::Status s = ValidateProblem(Problem{DType::kF32, 2, 1024, 64}, Limits(65536));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("b (k*n): 262144 bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("operand limit of 65536 bytes"), std::string::npos) << s.message();
  // Exactly at the limit is accepted.
  EXPECT_TRUE(ValidateProblem(Problem{DType::kF32, 2, 256, 64}, Limits(65536)).ok());
}

TEST(ProblemLimitsTest, OperandsTogetherBeyondDeviceMemoryAreRefused) {
  // A, B and C are 4096 bytes each (f32 32x32x32): 12288 bytes together.
  const Problem p{DType::kF32, 32, 32, 32};
  EXPECT_TRUE(ValidateProblem(p, Limits(1 << 20, 12288)).ok());
  const absl::Status s = ValidateProblem(p, Limits(1 << 20, 12287));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("12288 bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("device memory limit of 12287"), std::string::npos) << s.message();
  EXPECT_TRUE(ValidateProblem(p, Limits(1 << 20, 0)).ok()) << "0 means no device limit";
}

}  // namespace
}  // namespace arbiter
