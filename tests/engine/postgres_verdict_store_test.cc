// What only the PostgreSQL store promises, beyond the store contract
// (verdict_store_contract_test.cc): passwords never from the URI into logs,
// concurrent daemons migrating a fresh database once, a newer schema refused,
// the server going away and coming back, and lease keys every build agrees on.
// Runs against a real server (tests/engine/postgres_server.h), skipped with the
// reason where PostgreSQL is not installed.
#include "engine/postgres_verdict_store.h"

#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/pg_leases.h"
#include "gtest/gtest.h"
#include "tests/engine/postgres_server.h"
#include "tests/engine/store_test_util.h"

namespace arbiter::testing {
namespace {

TEST(RedactStoreLocationTest, PasswordsInAUriAreRedacted) {
  EXPECT_EQ(RedactStoreLocation("postgresql://arbiter:s3cret@db.internal:5432/arbiter"),
            "postgresql://arbiter:***@db.internal:5432/arbiter");
  EXPECT_EQ(RedactStoreLocation("postgres://u:p%40ss:w@h1,h2/db?sslmode=require&password=x&a=b"),
            "postgres://u:***@h1,h2/db?sslmode=require&password=***&a=b");
  EXPECT_EQ(RedactStoreLocation("postgresql://arbiter@db/arbiter?password=only"),
            "postgresql://arbiter@db/arbiter?password=***");
}

TEST(RedactStoreLocationTest, LocationsWithoutPasswordsAreUnchanged) {
  for (const std::string location :
       {"postgresql://arbiter@db:5432/arbiter", "postgresql://db/arbiter?sslmode=verify-full",
        "postgresql:///arbiter?host=/run/postgresql", "./arbiter.db", "/var/lib/a:b@c.db"}) {
    EXPECT_EQ(RedactStoreLocation(location), location);
  }
}

// FNV-1a 64 of "matmul\x1fcpu|x\x1ff32\x1fm(256,512]a8.n(256,512]a8.k(256,512]a8", as a
// signed bigint: computed outside this code base.
constexpr int64_t kPinnedLeaseKey = 5644291732640127774;

TEST(PostgresLeaseKeyTest, KeyIsFixedByTheKeyTextAlone) {
  // Daemons of different builds must agree on the lock a bucket takes: the key is a
  // fixed function (FNV-1a 64) of the key text, pinned here.
  const Bucket bucket = BucketFor(512, 512, 512);
  EXPECT_EQ(PgLeases::Key(kDevice, DType::kF32, bucket),
            PgLeases::Key(std::string(kDevice), DType::kF32, bucket));
  EXPECT_NE(PgLeases::Key(kDevice, DType::kF32, bucket),
            PgLeases::Key(kDevice, DType::kF16, bucket));
  EXPECT_NE(PgLeases::Key(kDevice, DType::kF32, bucket),
            PgLeases::Key(kOtherDevice, DType::kF32, bucket));
  EXPECT_EQ(PgLeases::Key("cpu|x", DType::kF32, bucket), kPinnedLeaseKey);
}

// A database of the binary's shared server for each test.
class PostgresVerdictStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    server_ = SharedPostgresServer(&why);
    if (server_ == nullptr) GTEST_SKIP() << why;
    absl::StatusOr<std::string> database = server_->EmptyStoreDatabase();
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *database;
  }

  void TearDown() override {
    // A test that stopped the server must not leave it stopped for the next one.
    if (server_ != nullptr && !server_->running()) {
      absl::Status restarted = server_->Restart();
      EXPECT_TRUE(restarted.ok()) << restarted;
    }
  }

  StoreOptions WithPassword(const std::string& origin = "test") const {
    StoreOptions options;
    options.password_file = server_->password_file();
    options.origin = origin;
    options.reconnect_interval_seconds = 0.05;
    return options;
  }

  absl::StatusOr<std::unique_ptr<VerdictStore>> Open(const std::string& origin = "test") {
    return VerdictStore::Open(server_->Uri(database_), WithPassword(origin));
  }

  PostgresServer* server_ = nullptr;
  std::string database_;
};

TEST_F(PostgresVerdictStoreTest, PasswordComesFromTheFileAndNeverAppearsInMessages) {
  absl::StatusOr<std::unique_ptr<VerdictStore>> opened = Open();
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->Describe(), server_->Uri(database_));

  // No password anywhere (PGPASSWORD unset, no passfile): refused.
  unsetenv("PGPASSWORD");
  setenv("PGPASSFILE", "/nonexistent", 1);
  StoreOptions none;
  absl::StatusOr<std::unique_ptr<VerdictStore>> refused =
      VerdictStore::Open(server_->Uri(database_), none);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();

  // A wrong password in the URI: refused, and neither message nor description holds it.
  const std::string wrong = "wr0ng-pa55word";
  const std::string uri = "postgresql://arbiter:" + wrong +
                          "@127.0.0.1:" + std::to_string(server_->port()) + "/" + database_;
  refused = VerdictStore::Open(uri, none);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(std::string(refused.status().message()).find(wrong), std::string::npos)
      << refused.status();
  EXPECT_EQ(RedactStoreLocation(uri).find(wrong), std::string::npos);

  // PGPASSWORD, libpq's own source, works where no file is given.
  setenv("PGPASSWORD", server_->password().c_str(), 1);
  absl::StatusOr<std::unique_ptr<VerdictStore>> from_env =
      VerdictStore::Open(server_->Uri(database_), none);
  unsetenv("PGPASSWORD");
  unsetenv("PGPASSFILE");
  EXPECT_TRUE(from_env.ok()) << from_env.status();
}

TEST_F(PostgresVerdictStoreTest, UnreachableServerIsUnavailableAtOpen) {
  const std::string uri = "postgresql://arbiter:hidden@127.0.0.1:1/nowhere";
  absl::StatusOr<std::unique_ptr<VerdictStore>> opened = VerdictStore::Open(uri, StoreOptions{});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kUnavailable) << opened.status();
  const std::string message(opened.status().message());
  EXPECT_NE(message.find("postgresql://arbiter:***@127.0.0.1:1/nowhere"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("hidden"), std::string::npos) << message;
}

TEST_F(PostgresVerdictStoreTest, DaemonsOpeningAFreshDatabaseTogetherMigrateItOnce) {
  constexpr int kDaemons = 6;
  std::vector<absl::StatusOr<std::unique_ptr<VerdictStore>>> opened(kDaemons);
  std::vector<std::thread> daemons;
  for (int i = 0; i < kDaemons; ++i) {
    daemons.emplace_back([&, i] { opened[i] = Open("daemon" + std::to_string(i)); });
  }
  for (std::thread& t : daemons) t.join();
  for (const auto& store : opened) {
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->schema_version(), PostgresVerdictStore::kSchemaVersion);
  }
  absl::StatusOr<std::string> rows = server_->Query(database_, "SELECT count(*) FROM arbiter.meta");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, "1");
  absl::StatusOr<std::string> version =
      server_->Query(database_, "SELECT value FROM arbiter.meta WHERE key = 'schema_version'");
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, std::to_string(PostgresVerdictStore::kSchemaVersion));
}

TEST_F(PostgresVerdictStoreTest, NewerSchemaIsRefusedAndLeftAsItWas) {
  {
    absl::StatusOr<std::unique_ptr<VerdictStore>> opened = Open();
    ASSERT_TRUE(opened.ok()) << opened.status();
    ASSERT_TRUE(
        (*opened)->PutVerdict(MakeVerdict(kDevice, DType::kF32, 64, 64, 64, {"naive"})).ok());
  }
  const std::string newer = std::to_string(PostgresVerdictStore::kSchemaVersion + 1);
  ASSERT_TRUE(server_
                  ->Query(database_, "UPDATE arbiter.meta SET value = '" + newer +
                                         "' WHERE key = 'schema_version'")
                  .ok());

  absl::StatusOr<std::unique_ptr<VerdictStore>> refused = Open();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(std::string(refused.status().message()).find("schema_version " + newer),
            std::string::npos)
      << refused.status();
  EXPECT_EQ(
      *server_->Query(database_, "SELECT value FROM arbiter.meta WHERE key = 'schema_version'"),
      newer);
  EXPECT_EQ(*server_->Query(database_, "SELECT count(*) FROM arbiter.verdicts"), "1");
}

// Changes delivered to a subscription, for a test to wait on.
class Changes {
 public:
  std::function<void(const StoreChange&)> Callback() {
    return [this](const StoreChange& c) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(c);
      cv_.notify_all();
    };
  }
  bool WaitFor(StoreChange::What what) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] {
      for (const StoreChange& c : seen_) {
        if (c.what == what) return true;
      }
      return false;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<StoreChange> seen_;  // GUARDED_BY(mu_)
};

TEST_F(PostgresVerdictStoreTest, NotificationThisBuildCannotReadDropsEverything) {
  absl::StatusOr<std::unique_ptr<VerdictStore>> opened = Open();
  ASSERT_TRUE(opened.ok()) << opened.status();
  Changes changes;
  std::unique_ptr<StoreSubscription> subscription = (*opened)->Subscribe(changes.Callback());
  ASSERT_TRUE(server_->Query(database_, "NOTIFY arbiter_changes, '2\tfrom a newer daemon'").ok());
  EXPECT_TRUE(changes.WaitFor(StoreChange::What::kEverything));
}

TEST_F(PostgresVerdictStoreTest, ServerDownMeansUnavailableThenEverythingResumesWhenItReturns) {
  absl::StatusOr<std::unique_ptr<VerdictStore>> opened = Open("survivor");
  ASSERT_TRUE(opened.ok()) << opened.status();
  VerdictStore& store = **opened;
  const Verdict before = MakeVerdict(kDevice, DType::kF32, 300, 300, 300, {"tiled", "naive"});
  ASSERT_TRUE(store.PutVerdict(before).ok());
  Changes changes;
  std::unique_ptr<StoreSubscription> subscription = store.Subscribe(changes.Callback());

  ASSERT_TRUE(server_->Stop().ok());
  EXPECT_EQ(store.Health().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.GetVerdict(kDevice, DType::kF32, before.bucket).status().code(),
            absl::StatusCode::kUnavailable);
  Force f;
  f.fingerprint = kDevice;
  f.dtype = DType::kF32;
  f.bucket = before.bucket;
  f.candidate = "naive";
  f.reason = "made while the store was down";
  EXPECT_EQ(store.PutForce(f).code(), absl::StatusCode::kUnavailable)
      << "a write the store could not make was acknowledged";
  absl::StatusOr<std::unique_ptr<StoreLease>> lease =
      store.TryLease(kDevice, DType::kF32, before.bucket);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kUnavailable);

  ASSERT_TRUE(server_->Restart().ok());
  // Poll with a deadline: the store reconnects on use, the listener on its own.
  absl::Status health = store.Health();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!health.ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    health = store.Health();
  }
  ASSERT_TRUE(health.ok()) << health;
  EXPECT_TRUE(changes.WaitFor(StoreChange::What::kEverything))
      << "no resync after the listener reconnected";
  absl::StatusOr<Verdict> after = store.GetVerdict(kDevice, DType::kF32, before.bucket);
  ASSERT_TRUE(after.ok()) << after.status();
  ExpectSameVerdict(before, *after);
  absl::StatusOr<std::optional<Force>> force = store.GetForce(kDevice, DType::kF32, before.bucket);
  ASSERT_TRUE(force.ok()) << force.status();
  EXPECT_FALSE(force->has_value()) << "the refused force was written after all";
  EXPECT_TRUE(store.PutForce(f).ok());
  EXPECT_TRUE(changes.WaitFor(StoreChange::What::kForces)) << "notifications did not resume";
  lease = store.TryLease(kDevice, DType::kF32, before.bucket);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_NE(*lease, nullptr);
}

}  // namespace
}  // namespace arbiter::testing
