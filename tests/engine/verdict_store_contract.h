// Fixture of the store contract tests: every VerdictStore implementation - the
// SQLite file and PostgreSQL - passes the same typed tests. Each test gets a
// fresh, empty store (a new file; a new database on a real PostgreSQL server that
// the whole binary shares, skipped with the reason when PostgreSQL is not
// installed). What only a shared store promises (leases across daemons,
// notifications) is skipped for SQLite, which serves one daemon.
// verdict_store_contract_test.cc holds what one daemon relies on (verdicts,
// invalidation, forces, quarantine); verdict_store_sharing_test.cc what daemons
// sharing a store rely on (fingerprints, leases, change notifications).
#pragma once

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

}  // namespace arbiter::testing
