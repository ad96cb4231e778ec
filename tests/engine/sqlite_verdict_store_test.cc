// What only the SQLite store promises, beyond the store contract
// (verdict_store_contract_test.cc): its file records the schema version and runs
// in WAL mode, a file from a newer schema or not a database at all is refused,
// and ":memory:" holds a private store.
#include "engine/sqlite_verdict_store.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/engine/store_test_util.h"

namespace arbiter::testing {
namespace {

// Each test gets a fresh directory holding the store file, removed afterwards.
class SqliteVerdictStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir =
        (std::filesystem::temp_directory_path() / "arbiter_sqlite_store_XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr) << std::strerror(errno);
    dir_ = dir;
    path_ = (dir_ / "verdicts.db").string();
    absl::StatusOr<std::unique_ptr<SqliteVerdictStore>> opened = SqliteVerdictStore::Open(path_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
  }

  void TearDown() override {
    store_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<SqliteVerdictStore> store_;
};

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

TEST_F(SqliteVerdictStoreTest, SchemaVersionIsRecordedInTheFile) {
  EXPECT_EQ(store_->schema_version(), SqliteVerdictStore::kSchemaVersion);
  store_.reset();
  EXPECT_EQ(QueryDirect(path_, "SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(SqliteVerdictStore::kSchemaVersion));
}

TEST_F(SqliteVerdictStoreTest, StoreWithNewerSchemaVersionIsRefused) {
  ASSERT_TRUE(store_->PutVerdict(MakeVerdict(kDevice, DType::kF32, 64, 64, 64, {"naive"})).ok());
  store_.reset();
  const int newer = SqliteVerdictStore::kSchemaVersion + 1;
  ASSERT_NO_FATAL_FAILURE(ExecDirect(
      path_, "UPDATE meta SET value = " + std::to_string(newer) + " WHERE key = 'schema_version'"));

  absl::StatusOr<std::unique_ptr<SqliteVerdictStore>> opened = SqliteVerdictStore::Open(path_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(opened.status().message());
  EXPECT_NE(message.find("schema_version " + std::to_string(newer)), std::string::npos) << message;
  EXPECT_NE(message.find("schema_version " + std::to_string(SqliteVerdictStore::kSchemaVersion)),
            std::string::npos)
      << message;
  // Refused, not rewritten: the newer version and its data are as they were.
  EXPECT_EQ(QueryDirect(path_, "SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(newer));
  EXPECT_EQ(QueryDirect(path_, "SELECT count(*) FROM verdicts"), "1");
}

TEST_F(SqliteVerdictStoreTest, FileStoreRunsInWalMode) {
  EXPECT_EQ(QueryDirect(path_, "PRAGMA journal_mode"), "wal");
}

TEST_F(SqliteVerdictStoreTest, FileThatIsNotADatabaseIsRefused) {
  store_.reset();
  const std::string junk = (dir_ / "junk.db").string();
  std::ofstream(junk) << "this is not an sqlite database, just a file that happens to be here";
  absl::StatusOr<std::unique_ptr<SqliteVerdictStore>> opened = SqliteVerdictStore::Open(junk);
  EXPECT_FALSE(opened.ok());
}

// Overwrites the start of the cell pointer array of `table`'s b-tree root page in
// the closed store at `path` with 0xff, as a torn write or a bad sector might:
// the file still opens and every other table reads, only that one is broken.
void DamageRootPageOf(const std::string& path, const std::string& table) {
  const std::string root =
      QueryDirect(path, "SELECT rootpage FROM sqlite_schema WHERE name = '" + table + "'");
  const std::string page_size = QueryDirect(path, "PRAGMA page_size");
  ASSERT_FALSE(root.empty() || page_size.empty()) << table;
  ASSERT_GT(std::stoi(root), 1);  // page 1 also holds the file header
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(std::stoi(root) - 1) * std::stoi(page_size) + 8);
  const std::string junk(16, '\xff');
  file.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  ASSERT_TRUE(file.good());
}

// Opening used to succeed (the schema and meta pages are whole), and the first
// ListVerdicts then failed with DATA_LOSS while the daemon said SERVING.
TEST_F(SqliteVerdictStoreTest, AStoreWithADamagedPageIsRefusedAtOpenNamingTheCheck) {
  for (int64_t m : {64, 512, 4096}) {
    ASSERT_TRUE(store_->PutVerdict(MakeVerdict(kDevice, DType::kF32, m, m, m, {"naive"})).ok());
  }
  store_.reset();  // closing checkpoints the WAL into the file
  ASSERT_NO_FATAL_FAILURE(DamageRootPageOf(path_, "verdicts"));

  absl::StatusOr<std::unique_ptr<SqliteVerdictStore>> opened = SqliteVerdictStore::Open(path_);
  ASSERT_FALSE(opened.ok()) << "a damaged store opened";
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss) << opened.status();
  const std::string message(opened.status().message());
  EXPECT_NE(message.find("quick_check"), std::string::npos) << message;
  EXPECT_NE(message.find(path_), std::string::npos) << message;
  // Refused, not repaired or replaced: the file is left for the operator.
  EXPECT_TRUE(std::filesystem::exists(path_));
}

TEST(SqliteMemoryStoreTest, InMemoryStoreHoldsVerdicts) {
  absl::StatusOr<std::unique_ptr<SqliteVerdictStore>> opened = SqliteVerdictStore::Open(":memory:");
  ASSERT_TRUE(opened.ok()) << opened.status();
  SqliteVerdictStore& store = **opened;
  EXPECT_EQ(store.schema_version(), SqliteVerdictStore::kSchemaVersion);
  Verdict v = MakeVerdict(kDevice, DType::kF64, 96, 80, 17, {"openblas", "naive"});
  ASSERT_TRUE(store.PutVerdict(v).ok());
  absl::StatusOr<Verdict> got = store.GetVerdict(kDevice, DType::kF64, v.bucket);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameVerdict(v, *got);
}

TEST_F(SqliteVerdictStoreTest, PasswordFileIsRefusedForAFile) {
  StoreOptions options;
  options.password_file = (dir_ / "password").string();
  absl::StatusOr<std::unique_ptr<VerdictStore>> opened = VerdictStore::Open(path_, options);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument) << opened.status();
}

}  // namespace
}  // namespace arbiter::testing
