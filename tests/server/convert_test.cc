#include "server/convert.h"

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

v1::Problem WireProblem(v1::DType dtype, int64_t m, int64_t n, int64_t k) {
  v1::Problem p;
  p.set_dtype(dtype);
  p.set_m(m);
  p.set_n(n);
  p.set_k(k);
  return p;
}

TEST(ConvertTest, UnspecifiedDTypeIsInvalidArgumentNamingTheAcceptedValues) {
  const auto dtype = DTypeFromProto(v1::DTYPE_UNSPECIFIED, "problem.dtype");
  ASSERT_EQ(dtype.status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* name : {"problem.dtype", "f32", "f64", "f16", "bf16", "DTYPE_BF16"}) {
    EXPECT_NE(dtype.status().message().find(name), std::string::npos)
        << name << " missing in " << dtype.status().message();
  }
}

TEST(ConvertTest, UnknownDTypeValueIsInvalidArgumentNamingTheValue) {
  const auto dtype = DTypeFromProto(static_cast<v1::DType>(42), "dtype");
  ASSERT_EQ(dtype.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dtype.status().message().find("42"), std::string::npos);
}

TEST(ConvertTest, EveryDTypeRoundTrips) {
  for (DType d : kAllDTypes) {
    const auto back = DTypeFromProto(DTypeToProto(d), "dtype");
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, d);
  }
}

TEST(ConvertTest, ProblemDimensionsAreCheckedAgainstTheLimits) {
  ProblemLimits limits;
  limits.max_operand_bytes = 4096;
  EXPECT_TRUE(ProblemFromProto(WireProblem(v1::DTYPE_F32, 1024, 1, 1), limits).ok());
  for (const v1::Problem& bad :
       {WireProblem(v1::DTYPE_F32, 0, 8, 8), WireProblem(v1::DTYPE_F32, 8, -1, 8),
        WireProblem(v1::DTYPE_UNSPECIFIED, 8, 8, 8)}) {
    const auto p = ProblemFromProto(bad, limits);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad.DebugString();
    EXPECT_NE(p.status().message().find("problem."), std::string::npos) << p.status().message();
  }
  // Past the operand limit (C is 1025 * 1 * 4 bytes): refused, the field and limit named.
  const auto over = ProblemFromProto(WireProblem(v1::DTYPE_F32, 1025, 1, 1), limits);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("problem.a (m*k)"), std::string::npos)
      << over.status().message();
}

TEST(ConvertTest, UnspecifiedDeterminismMeansAnyAndUnspecifiedTuningMeansTheDefault) {
  EXPECT_EQ(*DeterminismFromProto(v1::DETERMINISM_UNSPECIFIED), Determinism::kNondeterministic);
  EXPECT_EQ(*DeterminismFromProto(v1::DETERMINISM_BATCH_INVARIANT), Determinism::kBatchInvariant);
  EXPECT_FALSE(DeterminismFromProto(static_cast<v1::Determinism>(9)).ok());
  EXPECT_FALSE(TuningFromProto(v1::TUNING_POLICY_UNSPECIFIED)->has_value());
  EXPECT_EQ(**TuningFromProto(v1::TUNING_POLICY_ASYNC), TuningPolicy::kAsync);
  EXPECT_FALSE(TuningFromProto(static_cast<v1::TuningPolicy>(9)).ok());
}

TEST(ConvertTest, VerdictCarriesEveryResultAndItsFigures) {
  Verdict v;
  v.fingerprint = "cpu|test";
  v.dtype = DType::kBF16;
  v.measured = Problem{DType::kBF16, 33, 17, 9};
  v.bucket = BucketOf(v.measured);
  v.candidates = "a@1,b@2";
  v.winner = "b";
  v.winner_version = 2;
  v.source = VerdictSource::kMeasured;
  v.reason = "fastest";
  v.created_unix = 1234;
  CandidateResult a;
  a.name = "a";
  a.version = 1;
  a.state = ResultState::kFailedOracle;
  a.reason = "max error 3 over budget 1";
  CandidateResult b;
  b.name = "b";
  b.version = 2;
  b.tier = 3;
  b.determinism = Determinism::kRunToRun;
  b.state = ResultState::kTimed;
  b.median_seconds = 1.5e-5;
  b.spread = 0.02;
  b.samples = 30;
  b.max_abs_error = 1e-3;
  b.max_rel_error = 2e-4;
  v.results = {a, b};

  v1::Verdict out;
  ToProto(v, &out);
  EXPECT_EQ(out.dtype(), v1::DTYPE_BF16);
  EXPECT_EQ(out.bucket(), v.bucket.ToString());
  EXPECT_EQ(out.winner(), "b");
  EXPECT_EQ(out.winner_version(), 2);
  EXPECT_EQ(out.source(), v1::VERDICT_SOURCE_MEASURED);
  EXPECT_EQ(out.measured().m(), 33);
  EXPECT_EQ(out.candidates(), "a@1,b@2");
  EXPECT_EQ(out.created_unix(), 1234);
  ASSERT_EQ(out.results_size(), 2);
  EXPECT_EQ(out.results(0).state(), "failed_oracle");
  EXPECT_EQ(out.results(0).reason(), a.reason);
  EXPECT_EQ(out.results(1).state(), "timed");
  EXPECT_EQ(out.results(1).determinism(), v1::DETERMINISM_RUN_TO_RUN);
  EXPECT_DOUBLE_EQ(out.results(1).median_seconds(), 1.5e-5);
  EXPECT_EQ(out.results(1).samples(), 30);
  EXPECT_DOUBLE_EQ(out.results(1).max_rel_error(), 2e-4);
}

}  // namespace
}  // namespace arbiter::server
