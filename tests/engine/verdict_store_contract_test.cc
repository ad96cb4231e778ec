// The store contract, what one daemon relies on: verdicts survive restarts and
// are replaced whole, invalidation removes exactly its scope, forces and
// quarantine are kept and removed as asked, figures come back as stored - for
// every VerdictStore implementation (fixture: verdict_store_contract.h).
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/store_test_util.h"
#include "tests/engine/verdict_store_contract.h"

namespace arbiter::testing {
namespace {

TYPED_TEST_SUITE(VerdictStoreContractTest, StoreKinds, StoreNames);

TYPED_TEST(VerdictStoreContractTest, VerdictWithSeveralResultsSurvivesRestart) {
  Verdict v;
  v.fingerprint = kDevice;
  v.dtype = DType::kBF16;
  v.measured = Problem{DType::kBF16, 4095, 1000, 777};
  v.bucket = BucketOf(v.measured);
  v.candidates = "cublas@3,naive@1,tiled@2,wgmma@5,wmma@1";
  v.winner = "wgmma";
  v.winner_version = 5;
  v.source = VerdictSource::kProvisional;
  v.reason = "wgmma 1.234 ms beats cublas 1.5 ms by 21.7% (noise 0.8%)";
  v.created_unix = 1712345678;
  // Every state and determinism level, and figures that are not round in binary.
  v.results = {
      Result("wgmma", 5, 3, Determinism::kBatchInvariant, ResultState::kTimed, "",
             1.2345678901234567e-3, 0.0081234, 31, 3.0517578125e-5, 1.0 / 3.0),
      Result("cublas", 3, 2, Determinism::kNondeterministic, ResultState::kFailedOracle,
             "element (17, 4) off by 0.5 > tolerance 0.01", 1.5e-3, 0.2, 12, 0.5, 0.1),
      Result("tiled", 2, 1, Determinism::kRunToRun, ResultState::kError, "launch: out of memory", 0,
             0, 0, 0, 0),
      Result("naive", 1, 0, Determinism::kRunToRun, ResultState::kUnmeasured, "time budget spent",
             0, 0, 0, 0, 0),
      Result("wmma", 1, 2, Determinism::kBatchInvariant, ResultState::kQuarantined,
             "two runs differ in 3 elements", 2.0e-3, 0.05, 8, 1e-300, 4.9e-324),
  };
  ASSERT_TRUE(this->store_->PutVerdict(v).ok());

  ASSERT_NO_FATAL_FAILURE(this->Reopen());
  absl::StatusOr<Verdict> got = this->store_->GetVerdict(kDevice, DType::kBF16, v.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameVerdict(v, *got);
}

TYPED_TEST(VerdictStoreContractTest, PutReplacesVerdictAndAllItsResults) {
  Verdict first = MakeVerdict(kDevice, DType::kF32, 300, 300, 300, {"cublas", "tiled", "naive"});
  ASSERT_TRUE(this->store_->PutVerdict(first).ok());
  Verdict second = MakeVerdict(kDevice, DType::kF32, 260, 292, 500, {"tiled"});
  second.source = VerdictSource::kForced;
  second.reason = "forced by operator";
  ASSERT_EQ(first.bucket, second.bucket);
  ASSERT_TRUE(this->store_->PutVerdict(second).ok());

  absl::StatusOr<Verdict> got = this->store_->GetVerdict(kDevice, DType::kF32, first.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameVerdict(second, *got);
  EXPECT_EQ(this->RemainingOn(kDevice).size(), 1u);
}

TYPED_TEST(VerdictStoreContractTest, GetVerdictOfAbsentKeyIsNotFound) {
  Verdict v = MakeVerdict(kDevice, DType::kF32, 512, 512, 512, {"cublas"});
  ASSERT_TRUE(this->store_->PutVerdict(v).ok());

  EXPECT_EQ(this->store_->GetVerdict(kDevice, DType::kF64, v.bucket).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(
      this->store_->GetVerdict(kDevice, DType::kF32, BucketFor(512, 512, 513)).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->GetVerdict(kOtherDevice, DType::kF32, v.bucket).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(this->store_->GetVerdict(kDevice, DType::kF32, v.bucket).ok());
}

// A bucket's verdict, a refinement of one of its shapes and a split half: three rows.
std::vector<Verdict> BucketWithScopedVerdicts(const std::string& fingerprint) {
  Verdict bucket = MakeVerdict(fingerprint, DType::kF32, 64, 64, 64, {"wide", "narrow"});
  Verdict refined = MakeVerdict(fingerprint, DType::kF32, 40, 64, 64, {"narrow", "wide"});
  refined.candidates = bucket.candidates;  // the same set raced, as the engine records it
  refined.scope = VerdictScope::Shape(refined.measured);
  refined.reason = "refined among the leaders";
  Verdict half = refined;
  half.scope = VerdictScope::Half('m', 32, 48);
  half.reason = "split (evidence); this half measured at 40x64x64";
  return {bucket, refined, half};
}

TYPED_TEST(VerdictStoreContractTest, RefinementsAndSplitHalvesAreKeptBesideTheirBucketsVerdict) {
  const std::vector<Verdict> put = BucketWithScopedVerdicts(kDevice);
  for (const Verdict& v : put) ASSERT_TRUE(this->store_->PutVerdict(v).ok());
  // Another bucket's verdict (k differs): not one of the first's.
  Verdict other = MakeVerdict(kDevice, DType::kF32, 64, 64, 128, {"wide"});
  ASSERT_TRUE(this->store_->PutVerdict(other).ok());
  ASSERT_NO_FATAL_FAILURE(this->Reopen());

  // Get serves the bucket's own; the listing of the bucket holds all three.
  absl::StatusOr<Verdict> got = this->store_->GetVerdict(kDevice, DType::kF32, put[0].bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameVerdict(put[0], *got);
  VerdictFilter filter;
  filter.bucket = put[0].bucket;
  absl::StatusOr<std::vector<Verdict>> listed = this->store_->ListVerdicts(kDevice, filter);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 3u);
  for (const Verdict& want : put) {
    bool found = false;
    for (const Verdict& v : *listed) {
      if (v.scope == want.scope) {
        ExpectSameVerdict(want, v);
        found = true;
      }
    }
    EXPECT_TRUE(found) << "scope \"" << want.scope.ToString() << "\"";
  }
  absl::StatusOr<std::optional<Verdict>> loaded =
      LoadBucketVerdicts(*this->store_, kDevice, BucketKey{DType::kF32, put[0].bucket});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_TRUE((*loaded)->scope.whole());
  EXPECT_EQ((*loaded)->scoped.size(), 2u);
}

TYPED_TEST(VerdictStoreContractTest, InvalidatingABucketRemovesItsRefinementsAndHalves) {
  for (const Verdict& v : BucketWithScopedVerdicts(kDevice)) {
    ASSERT_TRUE(this->store_->PutVerdict(v).ok());
  }
  Verdict other = MakeVerdict(kDevice, DType::kF32, 64, 64, 128, {"wide"});
  ASSERT_TRUE(this->store_->PutVerdict(other).ok());
  InvalidateScope scope;
  scope.bucket = BucketFor(64, 64, 64);
  absl::StatusOr<int> removed = this->store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 3);
  const std::vector<std::pair<DType, Bucket>> want = {{DType::kF32, other.bucket}};
  EXPECT_EQ(this->RemainingOn(kDevice), want);
}

TYPED_TEST(VerdictStoreContractTest, InvalidateByCandidateRemovesOnlyVerdictsThatRacedIt) {
  ASSERT_NO_FATAL_FAILURE(this->PutFixtureVerdicts());
  InvalidateScope scope;
  scope.candidate = "tiled";
  absl::StatusOr<int> removed = this->store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);

  const std::vector<std::pair<DType, Bucket>> want = {{DType::kF32, BucketFor(4096, 4096, 4096)},
                                                      {DType::kBF16, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(this->RemainingOn(kDevice), want);
  EXPECT_EQ(this->RemainingOn(kOtherDevice).size(), 1u);  // it raced "tiled" too, on another device
  // The survivors keep their results (the cascade took only the removed ones').
  absl::StatusOr<Verdict> kept =
      this->store_->GetVerdict(kDevice, DType::kF32, BucketFor(4096, 4096, 4096));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->results.size(), 2u);
}

TYPED_TEST(VerdictStoreContractTest, InvalidateByBucketRemovesOnlyThatBucket) {
  ASSERT_NO_FATAL_FAILURE(this->PutFixtureVerdicts());
  InvalidateScope scope;
  scope.bucket = BucketFor(512, 512, 512);
  absl::StatusOr<int> removed = this->store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);

  const std::vector<std::pair<DType, Bucket>> want = {{DType::kF32, BucketFor(4096, 4096, 4096)},
                                                      {DType::kBF16, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(this->RemainingOn(kDevice), want);
  EXPECT_EQ(this->RemainingOn(kOtherDevice).size(), 1u);
}

TYPED_TEST(VerdictStoreContractTest, InvalidateByDTypeRemovesOnlyThatDType) {
  ASSERT_NO_FATAL_FAILURE(this->PutFixtureVerdicts());
  InvalidateScope scope;
  scope.dtype = DType::kBF16;
  absl::StatusOr<int> removed = this->store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);

  const std::vector<std::pair<DType, Bucket>> want = {{DType::kF32, BucketFor(512, 512, 512)},
                                                      {DType::kF32, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(this->RemainingOn(kDevice), want);
  EXPECT_EQ(this->RemainingOn(kOtherDevice).size(), 1u);
}

TYPED_TEST(VerdictStoreContractTest, InvalidateWithSeveralFieldsRemovesOnlyTheirIntersection) {
  ASSERT_NO_FATAL_FAILURE(this->PutFixtureVerdicts());
  InvalidateScope scope;
  scope.candidate = "wgmma";
  scope.dtype = DType::kBF16;
  scope.bucket = BucketFor(512, 512, 512);
  absl::StatusOr<int> removed = this->store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);

  const std::vector<std::pair<DType, Bucket>> want = {{DType::kF32, BucketFor(512, 512, 512)},
                                                      {DType::kF32, BucketFor(4096, 4096, 4096)},
                                                      {DType::kBF16, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(this->RemainingOn(kDevice), want);
}

TYPED_TEST(VerdictStoreContractTest, InvalidateAllRemovesEveryVerdictOfTheFingerprintOnly) {
  ASSERT_NO_FATAL_FAILURE(this->PutFixtureVerdicts());
  InvalidateScope scope;
  scope.all = true;
  absl::StatusOr<int> removed = this->store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 4);

  EXPECT_TRUE(this->RemainingOn(kDevice).empty());
  ASSERT_NO_FATAL_FAILURE(this->Reopen());
  EXPECT_TRUE(this->RemainingOn(kDevice).empty());
  absl::StatusOr<Verdict> other =
      this->store_->GetVerdict(kOtherDevice, DType::kF32, BucketFor(512, 512, 512));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->results.size(), 2u);
}

TYPED_TEST(VerdictStoreContractTest, InvalidateWithEmptyScopeIsRefusedAndRemovesNothing) {
  ASSERT_NO_FATAL_FAILURE(this->PutFixtureVerdicts());
  EXPECT_EQ(this->store_->Invalidate(kDevice, InvalidateScope{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(this->RemainingOn(kDevice).size(), 4u);
}

TYPED_TEST(VerdictStoreContractTest, ListVerdictsNarrowsByEachFilterField) {
  ASSERT_NO_FATAL_FAILURE(this->PutFixtureVerdicts());
  VerdictFilter by_candidate;
  by_candidate.candidate = "wgmma";
  absl::StatusOr<std::vector<Verdict>> raced_wgmma =
      this->store_->ListVerdicts(kDevice, by_candidate);
  ASSERT_TRUE(raced_wgmma.ok()) << raced_wgmma.status();
  const std::vector<std::pair<DType, Bucket>> want_wgmma = {
      {DType::kF32, BucketFor(4096, 4096, 4096)},
      {DType::kBF16, BucketFor(512, 512, 512)},
      {DType::kBF16, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(Keys(*raced_wgmma), want_wgmma);

  VerdictFilter by_dtype_and_bucket;
  by_dtype_and_bucket.dtype = DType::kBF16;
  by_dtype_and_bucket.bucket = BucketFor(512, 512, 512);
  absl::StatusOr<std::vector<Verdict>> one =
      this->store_->ListVerdicts(kDevice, by_dtype_and_bucket);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].results.size(), 3u);

  EXPECT_EQ(this->RemainingOn(kDevice).size(), 4u);
  EXPECT_TRUE(this->RemainingOn("unknown device").empty());
}

TYPED_TEST(VerdictStoreContractTest, CountVerdictsCountsTheFingerprintsVerdictsOnly) {
  absl::StatusOr<int64_t> none = this->store_->CountVerdicts(kDevice);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0);
  this->PutFixtureVerdicts();
  absl::StatusOr<int64_t> four = this->store_->CountVerdicts(kDevice);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(*four, 4);
  EXPECT_EQ(*this->store_->CountVerdicts(kOtherDevice), 1);
  InvalidateScope f32;
  f32.dtype = DType::kF32;
  ASSERT_TRUE(this->store_->Invalidate(kDevice, f32).ok());
  EXPECT_EQ(*this->store_->CountVerdicts(kDevice), 2);
}

TYPED_TEST(VerdictStoreContractTest, ForcesArePutReplacedListedAndRemoved) {
  Force f;
  f.fingerprint = kDevice;
  f.dtype = DType::kF16;
  f.bucket = BucketFor(1024, 1024, 1024);
  f.candidate = "tiled";
  f.reason = "pin while cublas regresses";
  f.created_unix = 1711111111;
  ASSERT_TRUE(this->store_->PutForce(f).ok());
  Force other = f;
  other.dtype = DType::kF32;
  ASSERT_TRUE(this->store_->PutForce(other).ok());
  Force elsewhere = f;
  elsewhere.fingerprint = kOtherDevice;
  ASSERT_TRUE(this->store_->PutForce(elsewhere).ok());
  f.candidate = "wgmma";  // replaces the first
  ASSERT_TRUE(this->store_->PutForce(f).ok());

  ASSERT_NO_FATAL_FAILURE(this->Reopen());
  absl::StatusOr<std::optional<Force>> got = this->store_->GetForce(kDevice, DType::kF16, f.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->fingerprint, f.fingerprint);
  EXPECT_EQ((*got)->dtype, f.dtype);
  EXPECT_EQ((*got)->bucket, f.bucket);
  EXPECT_EQ((*got)->candidate, "wgmma");
  EXPECT_EQ((*got)->reason, f.reason);
  EXPECT_EQ((*got)->created_unix, f.created_unix);

  absl::StatusOr<std::vector<Force>> listed = this->store_->ListForces(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 2u);

  absl::StatusOr<bool> removed =
      this->store_->RemoveForce(kDevice, DType::kF16, f.bucket, VerdictScope{});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(*removed);
  removed = this->store_->RemoveForce(kDevice, DType::kF16, f.bucket, VerdictScope{});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(*removed);
  got = this->store_->GetForce(kDevice, DType::kF16, f.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());

  listed = this->store_->ListForces(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].dtype, DType::kF32);
  listed = this->store_->ListForces(kOtherDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
}

TYPED_TEST(VerdictStoreContractTest, AForceOfOneExactShapeIsKeptBesideItsBucketsAndRemovedAlone) {
  const Problem shape{DType::kBF16, 1536, 3072, 3072};
  Force bucket_wide;
  bucket_wide.fingerprint = kDevice;
  bucket_wide.dtype = shape.dtype;
  bucket_wide.bucket = BucketOf(shape);
  bucket_wide.candidate = "cublaslt_h2";
  bucket_wide.reason = "the bucket's pin";
  bucket_wide.created_unix = 1711111111;
  Force exact = bucket_wide;
  exact.scope = VerdictScope::Shape(shape);
  exact.candidate = "cublas";
  exact.reason = "measured 12% faster at this shape";
  ASSERT_TRUE(this->store_->PutForce(bucket_wide).ok());
  ASSERT_TRUE(this->store_->PutForce(exact).ok());

  ASSERT_NO_FATAL_FAILURE(this->Reopen());
  absl::StatusOr<std::vector<Force>> listed = this->store_->ListForces(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  std::map<std::string, Force> by_scope;
  for (const Force& f : *listed) by_scope[f.scope.ToString()] = f;
  ASSERT_TRUE(by_scope.count("") && by_scope.count("1536x3072x3072"));
  EXPECT_EQ(by_scope.at("").candidate, "cublaslt_h2");
  EXPECT_EQ(by_scope.at("1536x3072x3072").candidate, "cublas");
  EXPECT_EQ(by_scope.at("1536x3072x3072").bucket, bucket_wide.bucket);
  EXPECT_EQ(by_scope.at("1536x3072x3072").dtype, DType::kBF16);
  EXPECT_EQ(by_scope.at("1536x3072x3072").reason, exact.reason);
  // The bucket's own force is the whole-bucket one.
  absl::StatusOr<std::optional<Force>> got =
      this->store_->GetForce(kDevice, shape.dtype, bucket_wide.bucket);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->candidate, "cublaslt_h2");
  EXPECT_TRUE((*got)->scope.whole());

  // Removing the shape's force leaves the bucket's, and the other way round.
  absl::StatusOr<bool> removed =
      this->store_->RemoveForce(kDevice, shape.dtype, bucket_wide.bucket, exact.scope);
  ASSERT_TRUE(removed.ok() && *removed) << removed.status();
  listed = this->store_->ListForces(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE((*listed)[0].scope.whole());
  ASSERT_TRUE(this->store_->PutForce(exact).ok());
  removed = this->store_->RemoveForce(kDevice, shape.dtype, bucket_wide.bucket, VerdictScope{});
  ASSERT_TRUE(removed.ok() && *removed) << removed.status();
  listed = this->store_->ListForces(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].scope, exact.scope);
}

TYPED_TEST(VerdictStoreContractTest, AForceScopedToAShapeOutsideItsBucketOrToAHalfIsRefused) {
  Force f;
  f.fingerprint = kDevice;
  f.dtype = DType::kF32;
  f.bucket = BucketFor(64, 64, 64);
  f.candidate = "tiled";
  f.reason = "pin";
  f.scope = VerdictScope::Shape(Problem{DType::kF32, 128, 64, 64});  // another bucket's shape
  EXPECT_EQ(this->store_->PutForce(f).code(), absl::StatusCode::kInvalidArgument);
  f.scope = VerdictScope::Half('m', 32, 48);
  EXPECT_EQ(this->store_->PutForce(f).code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<Force>> listed = this->store_->ListForces(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
}

TYPED_TEST(VerdictStoreContractTest, QuarantineIsListedAndClearedByCandidate) {
  ASSERT_TRUE(this->store_->PutQuarantine(Quarantined(kDevice, "splitk", "*")).ok());
  ASSERT_TRUE(this->store_->PutQuarantine(Quarantined(kDevice, "splitk", "bf16")).ok());
  ASSERT_TRUE(this->store_
                  ->PutQuarantine(
                      Quarantined(kDevice, "wmma", "f16/m(512,1024]a8.n(512,1024]a8.k(512,1024]a8"))
                  .ok());
  ASSERT_TRUE(this->store_->PutQuarantine(Quarantined(kOtherDevice, "splitk", "*")).ok());

  ASSERT_NO_FATAL_FAILURE(this->Reopen());
  absl::StatusOr<std::vector<QuarantineEntry>> listed = this->store_->ListQuarantine(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 3u);
  const QuarantineEntry want = Quarantined(kDevice, "splitk", "*");
  const QuarantineEntry& got = (*listed)[0];  // ordered by candidate, then scope
  EXPECT_EQ(got.candidate, want.candidate);
  EXPECT_EQ(got.version, want.version);
  EXPECT_EQ(got.scope, want.scope);
  EXPECT_EQ(got.fingerprint, want.fingerprint);
  EXPECT_EQ(got.reason, want.reason);
  EXPECT_EQ(got.created_unix, want.created_unix);

  absl::StatusOr<int> cleared = this->store_->ClearQuarantine(kDevice, "splitk");
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(*cleared, 2);
  listed = this->store_->ListQuarantine(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].candidate, "wmma");
  listed = this->store_->ListQuarantine(kOtherDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
}

TYPED_TEST(VerdictStoreContractTest, ClearQuarantineOfEmptyCandidateClearsTheFingerprintOnly) {
  ASSERT_TRUE(this->store_->PutQuarantine(Quarantined(kDevice, "splitk", "*")).ok());
  ASSERT_TRUE(this->store_->PutQuarantine(Quarantined(kDevice, "wmma", "f16")).ok());
  ASSERT_TRUE(this->store_->PutQuarantine(Quarantined(kOtherDevice, "splitk", "*")).ok());

  absl::StatusOr<int> cleared = this->store_->ClearQuarantine(kDevice, "");
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(*cleared, 2);
  absl::StatusOr<std::vector<QuarantineEntry>> listed = this->store_->ListQuarantine(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
  listed = this->store_->ListQuarantine(kOtherDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
}

TYPED_TEST(VerdictStoreContractTest, NonFiniteFiguresComeBackAsStored) {
  Verdict v = MakeVerdict(kDevice, DType::kF16, 100, 100, 100, {"tiled", "naive"});
  v.results[1].state = ResultState::kUnmeasured;
  v.results[1].median_seconds = std::numeric_limits<double>::quiet_NaN();
  v.results[1].spread = std::numeric_limits<double>::quiet_NaN();
  v.results[1].max_rel_error = std::numeric_limits<double>::infinity();
  v.results[1].max_abs_error = -std::numeric_limits<double>::infinity();
  ASSERT_TRUE(this->store_->PutVerdict(v).ok());

  absl::StatusOr<Verdict> got = this->store_->GetVerdict(kDevice, DType::kF16, v.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->results.size(), 2u);
  EXPECT_TRUE(std::isnan(got->results[1].median_seconds));
  EXPECT_TRUE(std::isnan(got->results[1].spread));
  EXPECT_EQ(got->results[1].max_rel_error, std::numeric_limits<double>::infinity());
  EXPECT_EQ(got->results[1].max_abs_error, -std::numeric_limits<double>::infinity());
  ExpectSameResult(v.results[0], got->results[0]);
}

TYPED_TEST(VerdictStoreContractTest, SchemaVersionIsCurrentAfterOpenAndReopen) {
  EXPECT_EQ(this->store_->schema_version(), TypeParam::kSchemaVersion);
  ASSERT_NO_FATAL_FAILURE(this->Reopen());
  EXPECT_EQ(this->store_->schema_version(), TypeParam::kSchemaVersion);
}
}  // namespace
}  // namespace arbiter::testing
