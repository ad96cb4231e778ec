// What the CPU backend reads about its host, against fake /proc/cpuinfo and
// sysfs trees.
#include "backends/cpu/cpu_probe.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"

namespace arbiter::cpu {
namespace {

namespace fs = std::filesystem;

class FakeHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("cpu_probe_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const fs::path& relative, const std::string& text) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text;
  }
  void Cache(int index, int level, const std::string& type, const std::string& size) {
    const fs::path dir = fs::path("cpu") / "cpu0" / "cache" / ("index" + std::to_string(index));
    Write(dir / "level", std::to_string(level) + "\n");
    Write(dir / "type", type + "\n");
    Write(dir / "size", size + "\n");
  }

  fs::path root_;
};

TEST_F(FakeHostTest, ReadsTheFirstModelName) {
  Write("cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
        "\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n");
  EXPECT_EQ(ReadCpuModelName((root_ / "cpuinfo").string()), "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(ReadCpuModelName((root_ / "missing").string()), std::nullopt);
}

TEST_F(FakeHostTest, LastLevelCacheIsTheLargestOfTheHighestLevel) {
  Cache(0, 1, "Data", "48K");
  Cache(1, 1, "Instruction", "32K");
  Cache(2, 2, "Unified", "2048K");
  Cache(3, 3, "Unified", "8192K");
  Cache(4, 3, "Unified", "16384K");
  EXPECT_EQ(ReadLastLevelCacheBytes((root_ / "cpu").string()), int64_t{16} << 20);
}

TEST_F(FakeHostTest, NoCacheEntriesGiveNothing) {
  fs::create_directories(root_ / "cpu" / "cpu0");
  EXPECT_EQ(ReadLastLevelCacheBytes((root_ / "cpu").string()), std::nullopt);
  Cache(0, 1, "Data", "garbage");
  EXPECT_EQ(ReadLastLevelCacheBytes((root_ / "cpu").string()), std::nullopt);
}

TEST(CpuProbeTest, ParsesSysfsCacheSizes) {
  EXPECT_EQ(ParseCacheSize("48K"), 48 * 1024);
  EXPECT_EQ(ParseCacheSize("32M\n"), int64_t{32} << 20);
  EXPECT_EQ(ParseCacheSize("1024"), 1024);
  EXPECT_EQ(ParseCacheSize(""), std::nullopt);
  EXPECT_EQ(ParseCacheSize("K"), std::nullopt);
  EXPECT_EQ(ParseCacheSize("12Q"), std::nullopt);
  EXPECT_EQ(ParseCacheSize("-4K"), std::nullopt);
}

TEST_F(FakeHostTest, BackendDescribesTheFakeHost) {
  Write("cpuinfo", "model name\t: Test CPU 9000\n");
  Cache(0, 1, "Data", "32K");
  Cache(1, 3, "Unified", "16384K");
  CpuBackendOptions options;
  options.threads = 1;
  options.cpuinfo_path = (root_ / "cpuinfo").string();
  options.sysfs_cpu_dir = (root_ / "cpu").string();
  auto backend = CpuBackend::Create(options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->info().name, "Test CPU 9000");
  EXPECT_EQ((*backend)->info().cache_bytes, int64_t{16} << 20);
}

TEST_F(FakeHostTest, BackendFallsBackWhereSysfsListsNoCache) {
  CpuBackendOptions options;
  options.threads = 1;
  options.cpuinfo_path = (root_ / "missing").string();
  options.sysfs_cpu_dir = (root_ / "missing").string();
  auto backend = CpuBackend::Create(options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->info().cache_bytes, CpuBackend::kFallbackCacheBytes);
  EXPECT_FALSE((*backend)->info().name.empty());
}

}  // namespace
}  // namespace arbiter::cpu
