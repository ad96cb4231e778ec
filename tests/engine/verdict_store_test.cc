#include "engine/verdict_store.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace arbiter {
namespace {

constexpr char kDevice[] = "NVIDIA H200|sm_90|driver 550.54|cuda 12.4";
constexpr char kOtherDevice[] = "cpu|x86_64|openblas 0.3.21";

Bucket BucketFor(int64_t m, int64_t n, int64_t k) { return BucketOf(Problem{DType::kF32, m, n, k}); }

CandidateResult Result(std::string name, int version, int tier, Determinism determinism,
                       ResultState state, std::string reason, double median, double spread,
                       int samples, double max_abs, double max_rel) {
  CandidateResult r;
  r.name = std::move(name);
  r.version = version;
  r.tier = tier;
  r.determinism = determinism;
  r.state = state;
  r.reason = std::move(reason);
  r.median_seconds = median;
  r.spread = spread;
  r.samples = samples;
  r.max_abs_error = max_abs;
  r.max_rel_error = max_rel;
  return r;
}

// A measured verdict on `fingerprint` for (dtype, bucket of m x n x k) that raced `raced`
// (timed, in that order); the first is the winner.
Verdict MakeVerdict(const std::string& fingerprint, DType dtype, int64_t m, int64_t n, int64_t k,
                    const std::vector<std::string>& raced) {
  Verdict v;
  v.fingerprint = fingerprint;
  v.dtype = dtype;
  v.measured = Problem{dtype, m, n, k};
  v.bucket = BucketOf(v.measured);
  for (size_t i = 0; i < raced.size(); ++i) {
    v.results.push_back(Result(raced[i], 1, 1, Determinism::kRunToRun, ResultState::kTimed, "",
                               1e-3 * static_cast<double>(i + 1), 0.01, 20, 1e-6, 1e-7));
    v.candidates += (i ? "," : "") + raced[i] + "@1";
  }
  v.winner = raced.empty() ? "" : raced[0];
  v.winner_version = 1;
  v.reason = "fastest";
  v.created_unix = 1700000000;
  return v;
}

void ExpectSameResult(const CandidateResult& want, const CandidateResult& got) {
  SCOPED_TRACE(want.name);
  EXPECT_EQ(want.name, got.name);
  EXPECT_EQ(want.version, got.version);
  EXPECT_EQ(want.tier, got.tier);
  EXPECT_EQ(want.determinism, got.determinism);
  EXPECT_EQ(want.state, got.state);
  EXPECT_EQ(want.reason, got.reason);
  // Exact: a stored figure must come back bit for bit.
  EXPECT_EQ(want.median_seconds, got.median_seconds);
  EXPECT_EQ(want.spread, got.spread);
  EXPECT_EQ(want.samples, got.samples);
  EXPECT_EQ(want.max_abs_error, got.max_abs_error);
  EXPECT_EQ(want.max_rel_error, got.max_rel_error);
}

void ExpectSameVerdict(const Verdict& want, const Verdict& got) {
  EXPECT_EQ(want.fingerprint, got.fingerprint);
  EXPECT_EQ(want.dtype, got.dtype);
  EXPECT_EQ(want.bucket, got.bucket);
  EXPECT_EQ(want.candidates, got.candidates);
  EXPECT_EQ(want.winner, got.winner);
  EXPECT_EQ(want.winner_version, got.winner_version);
  EXPECT_EQ(want.source, got.source);
  EXPECT_EQ(want.reason, got.reason);
  EXPECT_EQ(want.measured, got.measured);
  EXPECT_EQ(want.created_unix, got.created_unix);
  ASSERT_EQ(want.results.size(), got.results.size());
  for (size_t i = 0; i < want.results.size(); ++i) ExpectSameResult(want.results[i], got.results[i]);
}

// (dtype, bucket) of each verdict, sorted: what a listing holds, order aside.
std::vector<std::pair<DType, Bucket>> Keys(const std::vector<Verdict>& verdicts) {
  std::vector<std::pair<DType, Bucket>> keys;
  for (const Verdict& v : verdicts) keys.emplace_back(v.dtype, v.bucket);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Each test gets a fresh directory holding the store file, removed afterwards.
class VerdictStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir =
        (std::filesystem::temp_directory_path() / "arbiter_verdict_store_XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr) << std::strerror(errno);
    dir_ = dir;
    path_ = (dir_ / "verdicts.db").string();
    ASSERT_NO_FATAL_FAILURE(Reopen());
  }

  void TearDown() override {
    store_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Closes the store and opens the same file again, as a daemon restart does.
  void Reopen() {
    store_.reset();
    absl::StatusOr<std::unique_ptr<VerdictStore>> opened = VerdictStore::Open(path_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
  }

  // Puts the verdicts used by the invalidation tests: on kDevice, f32 and bf16 in
  // two buckets each, some raced "tiled" and some not; one more on kOtherDevice.
  void PutFixtureVerdicts() {
    for (const Verdict& v : {
             MakeVerdict(kDevice, DType::kF32, 512, 512, 512, {"cublas", "tiled"}),
             MakeVerdict(kDevice, DType::kF32, 4096, 4096, 4096, {"cublas", "wgmma"}),
             MakeVerdict(kDevice, DType::kBF16, 512, 512, 512, {"cublas", "tiled", "wgmma"}),
             MakeVerdict(kDevice, DType::kBF16, 4096, 4096, 4096, {"wgmma"}),
             MakeVerdict(kOtherDevice, DType::kF32, 512, 512, 512, {"tiled", "openblas"}),
         }) {
      ASSERT_TRUE(store_->PutVerdict(v).ok());
    }
  }

  std::vector<std::pair<DType, Bucket>> RemainingOn(const std::string& fingerprint) {
    absl::StatusOr<std::vector<Verdict>> listed = store_->ListVerdicts(fingerprint, {});
    EXPECT_TRUE(listed.ok()) << listed.status();
    return listed.ok() ? Keys(*listed) : std::vector<std::pair<DType, Bucket>>{};
  }

  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<VerdictStore> store_;
};

TEST_F(VerdictStoreTest, VerdictWithSeveralResultsSurvivesRestart) {
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
      Result("tiled", 2, 1, Determinism::kRunToRun, ResultState::kError, "launch: out of memory",
             0, 0, 0, 0, 0),
      Result("naive", 1, 0, Determinism::kRunToRun, ResultState::kUnmeasured,
             "time budget spent", 0, 0, 0, 0, 0),
      Result("wmma", 1, 2, Determinism::kBatchInvariant, ResultState::kQuarantined,
             "two runs differ in 3 elements", 2.0e-3, 0.05, 8, 1e-300, 4.9e-324),
  };
  ASSERT_TRUE(store_->PutVerdict(v).ok());

  ASSERT_NO_FATAL_FAILURE(Reopen());
  absl::StatusOr<Verdict> got = store_->GetVerdict(kDevice, DType::kBF16, v.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameVerdict(v, *got);
}

TEST_F(VerdictStoreTest, PutReplacesVerdictAndAllItsResults) {
  Verdict first = MakeVerdict(kDevice, DType::kF32, 300, 300, 300, {"cublas", "tiled", "naive"});
  ASSERT_TRUE(store_->PutVerdict(first).ok());
  Verdict second = MakeVerdict(kDevice, DType::kF32, 260, 292, 500, {"tiled"});
  second.source = VerdictSource::kForced;
  second.reason = "forced by operator";
  ASSERT_EQ(first.bucket, second.bucket);
  ASSERT_TRUE(store_->PutVerdict(second).ok());

  absl::StatusOr<Verdict> got = store_->GetVerdict(kDevice, DType::kF32, first.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameVerdict(second, *got);
  EXPECT_EQ(RemainingOn(kDevice).size(), 1u);
}

TEST_F(VerdictStoreTest, GetVerdictOfAbsentKeyIsNotFound) {
  Verdict v = MakeVerdict(kDevice, DType::kF32, 512, 512, 512, {"cublas"});
  ASSERT_TRUE(store_->PutVerdict(v).ok());

  EXPECT_EQ(store_->GetVerdict(kDevice, DType::kF64, v.bucket).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetVerdict(kDevice, DType::kF32, BucketFor(512, 512, 513)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetVerdict(kOtherDevice, DType::kF32, v.bucket).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->GetVerdict(kDevice, DType::kF32, v.bucket).ok());
}

TEST_F(VerdictStoreTest, InvalidateByCandidateRemovesOnlyVerdictsThatRacedIt) {
  ASSERT_NO_FATAL_FAILURE(PutFixtureVerdicts());
  InvalidateScope scope;
  scope.candidate = "tiled";
  absl::StatusOr<int> removed = store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);

  const std::vector<std::pair<DType, Bucket>> want = {
      {DType::kF32, BucketFor(4096, 4096, 4096)}, {DType::kBF16, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(RemainingOn(kDevice), want);
  EXPECT_EQ(RemainingOn(kOtherDevice).size(), 1u);  // it raced "tiled" too, on another device
  // The survivors keep their results (the cascade took only the removed ones').
  absl::StatusOr<Verdict> kept =
      store_->GetVerdict(kDevice, DType::kF32, BucketFor(4096, 4096, 4096));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->results.size(), 2u);
}

TEST_F(VerdictStoreTest, InvalidateByBucketRemovesOnlyThatBucket) {
  ASSERT_NO_FATAL_FAILURE(PutFixtureVerdicts());
  InvalidateScope scope;
  scope.bucket = BucketFor(512, 512, 512);
  absl::StatusOr<int> removed = store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);

  const std::vector<std::pair<DType, Bucket>> want = {
      {DType::kF32, BucketFor(4096, 4096, 4096)}, {DType::kBF16, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(RemainingOn(kDevice), want);
  EXPECT_EQ(RemainingOn(kOtherDevice).size(), 1u);
}

TEST_F(VerdictStoreTest, InvalidateByDTypeRemovesOnlyThatDType) {
  ASSERT_NO_FATAL_FAILURE(PutFixtureVerdicts());
  InvalidateScope scope;
  scope.dtype = DType::kBF16;
  absl::StatusOr<int> removed = store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);

  const std::vector<std::pair<DType, Bucket>> want = {
      {DType::kF32, BucketFor(512, 512, 512)}, {DType::kF32, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(RemainingOn(kDevice), want);
  EXPECT_EQ(RemainingOn(kOtherDevice).size(), 1u);
}

TEST_F(VerdictStoreTest, InvalidateWithSeveralFieldsRemovesOnlyTheirIntersection) {
  ASSERT_NO_FATAL_FAILURE(PutFixtureVerdicts());
  InvalidateScope scope;
  scope.candidate = "wgmma";
  scope.dtype = DType::kBF16;
  scope.bucket = BucketFor(512, 512, 512);
  absl::StatusOr<int> removed = store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);

  const std::vector<std::pair<DType, Bucket>> want = {
      {DType::kF32, BucketFor(512, 512, 512)},
      {DType::kF32, BucketFor(4096, 4096, 4096)},
      {DType::kBF16, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(RemainingOn(kDevice), want);
}

TEST_F(VerdictStoreTest, InvalidateAllRemovesEveryVerdictOfTheFingerprintOnly) {
  ASSERT_NO_FATAL_FAILURE(PutFixtureVerdicts());
  InvalidateScope scope;
  scope.all = true;
  absl::StatusOr<int> removed = store_->Invalidate(kDevice, scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 4);

  EXPECT_TRUE(RemainingOn(kDevice).empty());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_TRUE(RemainingOn(kDevice).empty());
  absl::StatusOr<Verdict> other =
      store_->GetVerdict(kOtherDevice, DType::kF32, BucketFor(512, 512, 512));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->results.size(), 2u);
}

TEST_F(VerdictStoreTest, InvalidateWithEmptyScopeIsRefusedAndRemovesNothing) {
  ASSERT_NO_FATAL_FAILURE(PutFixtureVerdicts());
  EXPECT_EQ(store_->Invalidate(kDevice, InvalidateScope{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RemainingOn(kDevice).size(), 4u);
}

TEST_F(VerdictStoreTest, ListVerdictsNarrowsByEachFilterField) {
  ASSERT_NO_FATAL_FAILURE(PutFixtureVerdicts());
  VerdictFilter by_candidate;
  by_candidate.candidate = "wgmma";
  absl::StatusOr<std::vector<Verdict>> raced_wgmma = store_->ListVerdicts(kDevice, by_candidate);
  ASSERT_TRUE(raced_wgmma.ok()) << raced_wgmma.status();
  const std::vector<std::pair<DType, Bucket>> want_wgmma = {
      {DType::kF32, BucketFor(4096, 4096, 4096)},
      {DType::kBF16, BucketFor(512, 512, 512)},
      {DType::kBF16, BucketFor(4096, 4096, 4096)}};
  EXPECT_EQ(Keys(*raced_wgmma), want_wgmma);

  VerdictFilter by_dtype_and_bucket;
  by_dtype_and_bucket.dtype = DType::kBF16;
  by_dtype_and_bucket.bucket = BucketFor(512, 512, 512);
  absl::StatusOr<std::vector<Verdict>> one = store_->ListVerdicts(kDevice, by_dtype_and_bucket);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].results.size(), 3u);

  EXPECT_EQ(RemainingOn(kDevice).size(), 4u);
  EXPECT_TRUE(RemainingOn("unknown device").empty());
}

TEST_F(VerdictStoreTest, CountVerdictsCountsTheFingerprintsVerdictsOnly) {
  absl::StatusOr<int64_t> none = store_->CountVerdicts(kDevice);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0);
  PutFixtureVerdicts();
  absl::StatusOr<int64_t> four = store_->CountVerdicts(kDevice);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(*four, 4);
  EXPECT_EQ(*store_->CountVerdicts(kOtherDevice), 1);
  InvalidateScope f32;
  f32.dtype = DType::kF32;
  ASSERT_TRUE(store_->Invalidate(kDevice, f32).ok());
  EXPECT_EQ(*store_->CountVerdicts(kDevice), 2);
}

TEST_F(VerdictStoreTest, ForcesArePutReplacedListedAndRemoved) {
  Force f;
  f.fingerprint = kDevice;
  f.dtype = DType::kF16;
  f.bucket = BucketFor(1024, 1024, 1024);
  f.candidate = "tiled";
  f.reason = "pin while cublas regresses";
  f.created_unix = 1711111111;
  ASSERT_TRUE(store_->PutForce(f).ok());
  Force other = f;
  other.dtype = DType::kF32;
  ASSERT_TRUE(store_->PutForce(other).ok());
  Force elsewhere = f;
  elsewhere.fingerprint = kOtherDevice;
  ASSERT_TRUE(store_->PutForce(elsewhere).ok());
  f.candidate = "wgmma";  // replaces the first
  ASSERT_TRUE(store_->PutForce(f).ok());

  ASSERT_NO_FATAL_FAILURE(Reopen());
  absl::StatusOr<std::optional<Force>> got = store_->GetForce(kDevice, DType::kF16, f.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->fingerprint, f.fingerprint);
  EXPECT_EQ((*got)->dtype, f.dtype);
  EXPECT_EQ((*got)->bucket, f.bucket);
  EXPECT_EQ((*got)->candidate, "wgmma");
  EXPECT_EQ((*got)->reason, f.reason);
  EXPECT_EQ((*got)->created_unix, f.created_unix);

  absl::StatusOr<std::vector<Force>> listed = store_->ListForces(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 2u);

  absl::StatusOr<bool> removed = store_->RemoveForce(kDevice, DType::kF16, f.bucket);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(*removed);
  removed = store_->RemoveForce(kDevice, DType::kF16, f.bucket);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(*removed);
  got = store_->GetForce(kDevice, DType::kF16, f.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());

  listed = store_->ListForces(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].dtype, DType::kF32);
  listed = store_->ListForces(kOtherDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
}

QuarantineEntry Quarantined(const std::string& fingerprint, const std::string& candidate,
                            const std::string& scope) {
  QuarantineEntry q;
  q.candidate = candidate;
  q.version = 4;
  q.scope = scope;
  q.fingerprint = fingerprint;
  q.reason = "claimed run_to_run; two runs differ in 12 elements";
  q.created_unix = 1713000000;
  return q;
}

TEST_F(VerdictStoreTest, QuarantineIsListedAndClearedByCandidate) {
  ASSERT_TRUE(store_->PutQuarantine(Quarantined(kDevice, "splitk", "*")).ok());
  ASSERT_TRUE(store_->PutQuarantine(Quarantined(kDevice, "splitk", "bf16")).ok());
  ASSERT_TRUE(store_->PutQuarantine(Quarantined(kDevice, "wmma", "f16/m(512,1024]a8.n(512,1024]a8.k(512,1024]a8")).ok());
  ASSERT_TRUE(store_->PutQuarantine(Quarantined(kOtherDevice, "splitk", "*")).ok());

  ASSERT_NO_FATAL_FAILURE(Reopen());
  absl::StatusOr<std::vector<QuarantineEntry>> listed = store_->ListQuarantine(kDevice);
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

  absl::StatusOr<int> cleared = store_->ClearQuarantine(kDevice, "splitk");
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(*cleared, 2);
  listed = store_->ListQuarantine(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].candidate, "wmma");
  listed = store_->ListQuarantine(kOtherDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
}

TEST_F(VerdictStoreTest, ClearQuarantineOfEmptyCandidateClearsTheFingerprintOnly) {
  ASSERT_TRUE(store_->PutQuarantine(Quarantined(kDevice, "splitk", "*")).ok());
  ASSERT_TRUE(store_->PutQuarantine(Quarantined(kDevice, "wmma", "f16")).ok());
  ASSERT_TRUE(store_->PutQuarantine(Quarantined(kOtherDevice, "splitk", "*")).ok());

  absl::StatusOr<int> cleared = store_->ClearQuarantine(kDevice, "");
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(*cleared, 2);
  absl::StatusOr<std::vector<QuarantineEntry>> listed = store_->ListQuarantine(kDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
  listed = store_->ListQuarantine(kOtherDevice);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
}

// Runs `sql` on the store file through a connection of the test's own.
void ExecDirect(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

// The first column of the first row of `sql`, as text ("" when no row).
std::string QueryDirect(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string value;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      value = text ? text : "";
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return value;
}

TEST_F(VerdictStoreTest, SchemaVersionIsRecordedInTheFile) {
  EXPECT_EQ(store_->schema_version(), VerdictStore::kSchemaVersion);
  store_.reset();
  EXPECT_EQ(QueryDirect(path_, "SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(VerdictStore::kSchemaVersion));
}

TEST_F(VerdictStoreTest, StoreWithNewerSchemaVersionIsRefused) {
  ASSERT_TRUE(store_->PutVerdict(MakeVerdict(kDevice, DType::kF32, 64, 64, 64, {"naive"})).ok());
  store_.reset();
  const int newer = VerdictStore::kSchemaVersion + 1;
  ASSERT_NO_FATAL_FAILURE(ExecDirect(
      path_, "UPDATE meta SET value = " + std::to_string(newer) + " WHERE key = 'schema_version'"));

  absl::StatusOr<std::unique_ptr<VerdictStore>> opened = VerdictStore::Open(path_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(opened.status().message());
  EXPECT_NE(message.find("schema_version " + std::to_string(newer)), std::string::npos)
      << message;
  EXPECT_NE(message.find("schema_version " + std::to_string(VerdictStore::kSchemaVersion)),
            std::string::npos)
      << message;
  // Refused, not rewritten: the newer version and its data are as they were.
  EXPECT_EQ(QueryDirect(path_, "SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(newer));
  EXPECT_EQ(QueryDirect(path_, "SELECT count(*) FROM verdicts"), "1");
}

TEST_F(VerdictStoreTest, FileStoreRunsInWalMode) {
  EXPECT_EQ(QueryDirect(path_, "PRAGMA journal_mode"), "wal");
}

TEST_F(VerdictStoreTest, FileThatIsNotADatabaseIsRefused) {
  store_.reset();
  const std::string junk = (dir_ / "junk.db").string();
  std::ofstream(junk) << "this is not an sqlite database, just a file that happens to be here";
  absl::StatusOr<std::unique_ptr<VerdictStore>> opened = VerdictStore::Open(junk);
  EXPECT_FALSE(opened.ok());
}

TEST(VerdictStoreMemoryTest, InMemoryStoreHoldsVerdicts) {
  absl::StatusOr<std::unique_ptr<VerdictStore>> opened = VerdictStore::Open(":memory:");
  ASSERT_TRUE(opened.ok()) << opened.status();
  VerdictStore& store = **opened;
  EXPECT_EQ(store.schema_version(), VerdictStore::kSchemaVersion);
  Verdict v = MakeVerdict(kDevice, DType::kF64, 96, 80, 17, {"openblas", "naive"});
  ASSERT_TRUE(store.PutVerdict(v).ok());
  absl::StatusOr<Verdict> got = store.GetVerdict(kDevice, DType::kF64, v.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameVerdict(v, *got);
}

}  // namespace
}  // namespace arbiter
