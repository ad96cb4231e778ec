// The store contract: every VerdictStore implementation - the SQLite file and
// PostgreSQL - passes the same tests. Each test gets a fresh, empty store (a new
// file; a new database on a real PostgreSQL server that the whole binary shares,
// skipped with the reason when PostgreSQL is not installed). What only a shared
// store promises (leases across daemons, notifications) is skipped for SQLite,
// which serves one daemon.
#include <stdlib.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/postgres_verdict_store.h"
#include "engine/sqlite_verdict_store.h"
#include "engine/verdict_store.h"
#include "gtest/gtest.h"
#include "tests/engine/postgres_server.h"
#include "tests/engine/store_test_util.h"

namespace arbiter::testing {
namespace {

// Each test's SQLite store: a file in a fresh directory, removed afterwards.
class SqliteStores {
 public:
  static constexpr int kSchemaVersion = SqliteVerdictStore::kSchemaVersion;

  // Empty when ready; else why the test must be skipped.
  std::string SetUp() {
    std::string dir =
        (std::filesystem::temp_directory_path() / "arbiter_store_contract_XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) return std::string("mkdtemp: ") + std::strerror(errno);
    dir_ = dir;
    return "";
  }
  ~SqliteStores() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // Another store user on the same store: what a second daemon would open. `name`
  // tells users apart where the store can (not in a file).
  absl::StatusOr<std::unique_ptr<VerdictStore>> Open(const std::string& name = "daemon") {
    return VerdictStore::Open((dir_ / "verdicts.db").string());
  }
  // Ends every connection of the user `name` as if its daemon were killed.
  void Kill(const std::string& name) {}

 private:
  std::filesystem::path dir_;
};

// Each test's PostgreSQL store: a new database on the binary's shared server.
class PostgresStores {
 public:
  static constexpr int kSchemaVersion = PostgresVerdictStore::kSchemaVersion;

  std::string SetUp() {
    std::string why;
    server_ = SharedPostgresServer(&why);
    if (server_ == nullptr) return why;
    absl::StatusOr<std::string> database = server_->EmptyStoreDatabase();
    if (!database.ok()) return database.status().ToString();
    database_ = *database;
    return "";
  }

  absl::StatusOr<std::unique_ptr<VerdictStore>> Open(const std::string& name = "daemon") {
    StoreOptions options;
    options.password_file = server_->password_file();
    options.origin = name;
    return VerdictStore::Open(server_->Uri(database_, "application_name=" + name), options);
  }
  void Kill(const std::string& name) {
    absl::StatusOr<std::string> killed =
        server_->Query(database_,
                       "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE application_name = '" +
                           name + "'");
    ASSERT_TRUE(killed.ok()) << killed.status();
    ASSERT_NE(*killed, "0") << "no connection of " << name << " to end";
  }

 private:
  PostgresServer* server_ = nullptr;
  std::string database_;
};

// Changes a subscription delivered, for a test to wait on.
class ChangeLog {
 public:
  std::function<void(const StoreChange&)> Callback() {
    return [this](const StoreChange& c) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        changes_.push_back(c);
      }
      cv_.notify_all();
    };
  }
  // The first change delivered that `match` accepts, waiting for it at most `timeout`.
  std::optional<StoreChange> WaitFor(const std::function<bool(const StoreChange&)>& match,
                                     std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<StoreChange> found;
    cv_.wait_for(lock, timeout, [&] {
      for (const StoreChange& c : changes_) {
        if (match(c)) {
          found = c;
          return true;
        }
      }
      return false;
    });
    return found;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StoreChange> changes_;  // GUARDED_BY(mu_)
};

template <typename Stores>
class VerdictStoreContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string skip = stores_.SetUp();
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NO_FATAL_FAILURE(Reopen());
  }

  // Closes the store and opens it again, as a daemon restart does.
  void Reopen() {
    store_.reset();
    absl::StatusOr<std::unique_ptr<VerdictStore>> opened = stores_.Open();
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
  }

  // A second daemon's view of the same store.
  std::unique_ptr<VerdictStore> OpenPeer(const std::string& name) {
    absl::StatusOr<std::unique_ptr<VerdictStore>> opened = stores_.Open(name);
    EXPECT_TRUE(opened.ok()) << opened.status();
    return opened.ok() ? std::move(*opened) : nullptr;
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

  // `store`'s TryLease: the lease, or null while another holds it. An error from
  // the call fails the test (a store answers one way or the other).
  static std::unique_ptr<StoreLease> Lease(VerdictStore& store, DType dtype, const Bucket& bucket,
                                           const VerdictScope& scope = VerdictScope(),
                                           const std::string& fingerprint = kDevice) {
    absl::StatusOr<std::unique_ptr<StoreLease>> lease =
        store.TryLease(fingerprint, dtype, bucket, scope);
    if (!lease.ok()) {
      ADD_FAILURE() << "TryLease " << fingerprint << " " << DTypeName(dtype) << " " << bucket
                    << ": " << lease.status();
      return nullptr;
    }
    return *std::move(lease);
  }

  std::vector<std::pair<DType, Bucket>> RemainingOn(const std::string& fingerprint) {
    absl::StatusOr<std::vector<Verdict>> listed = store_->ListVerdicts(fingerprint, {});
    EXPECT_TRUE(listed.ok()) << listed.status();
    return listed.ok() ? Keys(*listed) : std::vector<std::pair<DType, Bucket>>{};
  }

  Stores stores_;
  std::unique_ptr<VerdictStore> store_;
};

class StoreNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, SqliteStores>) return "Sqlite";
    return "Postgres";
  }
};
using StoreKinds = ::testing::Types<SqliteStores, PostgresStores>;
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

// Two H200s that differ only in their UUIDs, and one on another driver.
DeviceInfo H200(const std::string& uuid, const std::string& driver) {
  DeviceInfo d;
  d.backend = "cuda";
  d.name = "NVIDIA H200";
  d.arch = "sm_90";
  d.compute_capability = 90;
  d.multiprocessors = 132;
  d.uuid = uuid;
  d.versions = {{"driver", driver}, {"runtime", "12.4"}, {"cublas", "12.4.5"}};
  return d;
}

TYPED_TEST(VerdictStoreContractTest, OnlyAnIdenticalFingerprintSharesVerdictsForcesAndQuarantine) {
  const std::string gpu0 = H200("GPU-aaaa", "550.54.15").Fingerprint();
  const std::string gpu1 = H200("GPU-bbbb", "550.54.15").Fingerprint();
  const std::string newer_driver = H200("GPU-cccc", "560.28.03").Fingerprint();
  ASSERT_EQ(gpu0, gpu1) << "the UUID must not be part of the fingerprint";
  ASSERT_NE(gpu0, newer_driver);

  // Another daemon (GPU 0's) writes; this one reads as GPU 1 and as the other driver.
  std::unique_ptr<VerdictStore> peer = this->OpenPeer("gpu0");
  ASSERT_NE(peer, nullptr);
  const Verdict v = MakeVerdict(gpu0, DType::kBF16, 4095, 4095, 4095, {"cublas_padded", "cublas"});
  ASSERT_TRUE(peer->PutVerdict(v).ok());
  Force f;
  f.fingerprint = gpu0;
  f.dtype = DType::kBF16;
  f.bucket = BucketFor(64, 64, 64);
  f.candidate = "cublas";
  f.reason = "pin";
  ASSERT_TRUE(peer->PutForce(f).ok());
  ASSERT_TRUE(peer->PutQuarantine(Quarantined(gpu0, "splitk", "*")).ok());

  absl::StatusOr<Verdict> shared = this->store_->GetVerdict(gpu1, DType::kBF16, v.bucket);
  ASSERT_TRUE(shared.ok()) << shared.status();
  ExpectSameVerdict(v, *shared);
  absl::StatusOr<std::optional<Force>> force = this->store_->GetForce(gpu1, f.dtype, f.bucket);
  ASSERT_TRUE(force.ok()) << force.status();
  EXPECT_TRUE(force->has_value());
  absl::StatusOr<std::vector<QuarantineEntry>> quarantine = this->store_->ListQuarantine(gpu1);
  ASSERT_TRUE(quarantine.ok()) << quarantine.status();
  EXPECT_EQ(quarantine->size(), 1u);

  EXPECT_EQ(this->store_->GetVerdict(newer_driver, DType::kBF16, v.bucket).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(this->RemainingOn(newer_driver).empty());
  force = this->store_->GetForce(newer_driver, f.dtype, f.bucket);
  ASSERT_TRUE(force.ok()) << force.status();
  EXPECT_FALSE(force->has_value());
  quarantine = this->store_->ListQuarantine(newer_driver);
  ASSERT_TRUE(quarantine.ok()) << quarantine.status();
  EXPECT_TRUE(quarantine->empty());
}

TYPED_TEST(VerdictStoreContractTest, LeaseIsExclusiveUntilReleased) {
  const Bucket bucket = BucketFor(512, 512, 512);
  VerdictStore& store = *this->store_;
  std::unique_ptr<StoreLease> first = this->Lease(store, DType::kF32, bucket);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(this->Lease(store, DType::kF32, bucket), nullptr) << "a held lease was granted twice";

  // Other keys are free: another bucket, dtype or device.
  for (auto [fingerprint, dtype, other] :
       {std::tuple{std::string(kDevice), DType::kF32, BucketFor(1024, 512, 512)},
        std::tuple{std::string(kDevice), DType::kBF16, bucket},
        std::tuple{std::string(kOtherDevice), DType::kF32, bucket}}) {
    EXPECT_NE(this->Lease(store, dtype, other, VerdictScope(), fingerprint), nullptr)
        << fingerprint << " " << DTypeName(dtype) << " " << other;
  }

  first.reset();
  EXPECT_NE(this->Lease(store, DType::kF32, bucket), nullptr)
      << "a released lease was not granted again";
}

TYPED_TEST(VerdictStoreContractTest, AShapesLeaseIsApartFromItsBucketsAndFromOtherShapes) {
  // A refinement of one shape and its bucket's measurement are measured apart, each
  // by one daemon of the fleet at a time.
  const Bucket bucket = BucketFor(512, 512, 512);
  const VerdictScope shape = VerdictScope::Shape(Problem{DType::kF32, 480, 512, 512});
  VerdictStore& store = *this->store_;
  std::unique_ptr<StoreLease> whole = this->Lease(store, DType::kF32, bucket);
  ASSERT_NE(whole, nullptr);
  std::unique_ptr<StoreLease> refining = this->Lease(store, DType::kF32, bucket, shape);
  ASSERT_NE(refining, nullptr) << "the bucket's lease held a refinement of one of its shapes";
  EXPECT_EQ(this->Lease(store, DType::kF32, bucket, shape), nullptr)
      << "a shape's lease was granted twice";
  const VerdictScope another = VerdictScope::Shape(Problem{DType::kF32, 448, 512, 512});
  EXPECT_NE(this->Lease(store, DType::kF32, bucket, another), nullptr)
      << "one shape's lease held another's";
  if (!store.shared()) return;
  std::unique_ptr<VerdictStore> peer = this->OpenPeer("peer");
  ASSERT_NE(peer, nullptr);
  EXPECT_EQ(this->Lease(*peer, DType::kF32, bucket, shape), nullptr)
      << "two daemons hold one shape's lease";
}

TYPED_TEST(VerdictStoreContractTest, LeaseIsExclusiveAcrossDaemons) {
  if (!this->store_->shared()) GTEST_SKIP() << "a SQLite store serves one daemon";
  const Bucket bucket = BucketFor(512, 512, 512);
  std::unique_ptr<VerdictStore> peer = this->OpenPeer("peer");
  ASSERT_NE(peer, nullptr);
  std::unique_ptr<StoreLease> held = this->Lease(*peer, DType::kF32, bucket);
  ASSERT_NE(held, nullptr);

  EXPECT_EQ(this->Lease(*this->store_, DType::kF32, bucket), nullptr)
      << "two daemons hold one bucket's lease";

  held.reset();
  EXPECT_NE(this->Lease(*this->store_, DType::kF32, bucket), nullptr)
      << "the lease was not granted once its holder released it";
}

TYPED_TEST(VerdictStoreContractTest, LeaseOfADaemonWhoseConnectionDiedIsGrantedToAnother) {
  if (!this->store_->shared()) GTEST_SKIP() << "a SQLite store serves one daemon";
  const Bucket bucket = BucketFor(2048, 2048, 64);
  std::unique_ptr<VerdictStore> holder = this->OpenPeer("holder");
  ASSERT_NE(holder, nullptr);
  std::unique_ptr<StoreLease> held = this->Lease(*holder, DType::kF16, bucket);
  ASSERT_NE(held, nullptr);
  ASSERT_EQ(this->Lease(*this->store_, DType::kF16, bucket), nullptr);

  // The holder never releases it: its connections end as a killed daemon's do.
  ASSERT_NO_FATAL_FAILURE(this->stores_.Kill("holder"));
  std::unique_ptr<StoreLease> granted;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (granted == nullptr && std::chrono::steady_clock::now() < deadline) {
    granted = this->Lease(*this->store_, DType::kF16, bucket);
    ASSERT_FALSE(this->HasFailure());  // a failed call ends the wait
    if (granted == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(granted, nullptr) << "a dead holder's lease still blocks the bucket";
}

TYPED_TEST(VerdictStoreContractTest, EveryChangeReachesTheOtherDaemonsSubscription) {
  if (!this->store_->shared()) GTEST_SKIP() << "a SQLite store serves one daemon: no one to tell";
  ChangeLog log;
  std::unique_ptr<StoreSubscription> subscription = this->store_->Subscribe(log.Callback());
  std::unique_ptr<VerdictStore> admin = this->OpenPeer("admin");
  ASSERT_NE(admin, nullptr);
  const Bucket bucket = BucketFor(200, 200, 200);
  auto from_admin = [](StoreChange::What what, const std::string& fingerprint,
                       std::optional<DType> dtype, std::optional<Bucket> bucket) {
    return [=](const StoreChange& c) {
      return c.what == what && c.origin == "admin" && c.fingerprint == fingerprint &&
             c.dtype == dtype && c.bucket == bucket;
    };
  };

  Force f;
  f.fingerprint = kDevice;
  f.dtype = DType::kF32;
  f.bucket = bucket;
  f.candidate = "cpu_reference";
  f.reason = "fleet";
  ASSERT_TRUE(admin->PutForce(f).ok());
  EXPECT_TRUE(log.WaitFor(from_admin(StoreChange::What::kForces, kDevice, DType::kF32, bucket)))
      << "force not pushed";

  ASSERT_TRUE(admin->PutVerdict(MakeVerdict(kDevice, DType::kF64, 9, 9, 9, {"naive"})).ok());
  EXPECT_TRUE(log.WaitFor(
      from_admin(StoreChange::What::kVerdicts, kDevice, DType::kF64, BucketFor(9, 9, 9))))
      << "verdict not pushed";

  InvalidateScope by_dtype;
  by_dtype.dtype = DType::kF64;
  ASSERT_TRUE(admin->Invalidate(kDevice, by_dtype).ok());
  EXPECT_TRUE(
      log.WaitFor(from_admin(StoreChange::What::kVerdicts, kDevice, DType::kF64, std::nullopt)))
      << "invalidation not pushed";

  ASSERT_TRUE(admin->PutQuarantine(Quarantined(kDevice, "splitk", "f32")).ok());
  EXPECT_TRUE(
      log.WaitFor(from_admin(StoreChange::What::kQuarantine, kDevice, std::nullopt, std::nullopt)))
      << "quarantine not pushed";

  absl::StatusOr<bool> removed =
      admin->RemoveForce(kDevice, DType::kF32, bucket, VerdictScope{});
  ASSERT_TRUE(removed.ok() && *removed) << removed.status();
  absl::StatusOr<int> cleared = admin->ClearQuarantine(kDevice, "");
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  // Delivered in commit order: the clear arriving means the removal was delivered before it.
  std::optional<StoreChange> last = log.WaitFor([](const StoreChange& c) {
    return c.what == StoreChange::What::kQuarantine && c.origin == "admin";
  });
  EXPECT_TRUE(last.has_value());
}

TEST(StoreChangeTest, CoversOnlyItsFingerprintAndScope) {
  StoreChange force;
  force.what = StoreChange::What::kForces;
  force.fingerprint = kDevice;
  force.dtype = DType::kF32;
  force.bucket = BucketFor(200, 200, 200);
  EXPECT_TRUE(force.Covers(kDevice, DType::kF32, BucketFor(200, 200, 200)));
  EXPECT_FALSE(force.Covers(kOtherDevice, DType::kF32, BucketFor(200, 200, 200)));
  EXPECT_FALSE(force.Covers(kDevice, DType::kBF16, BucketFor(200, 200, 200)));
  EXPECT_FALSE(force.Covers(kDevice, DType::kF32, BucketFor(4096, 200, 200)));
  StoreChange whole_dtype = force;
  whole_dtype.bucket.reset();
  EXPECT_TRUE(whole_dtype.Covers(kDevice, DType::kF32, BucketFor(4096, 200, 200)));
  EXPECT_FALSE(whole_dtype.Covers(kDevice, DType::kF16, BucketFor(4096, 200, 200)));
  EXPECT_TRUE(StoreChange{}.Covers(kOtherDevice, DType::kF16, BucketFor(1, 1, 1)))
      << "a resync covers everything";
}

}  // namespace
}  // namespace arbiter::testing
