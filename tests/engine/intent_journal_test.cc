#include "engine/intent_journal.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace arbiter {
namespace {

class IntentJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("intent_journal_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::unique_ptr<IntentJournal> Open() {
    auto journal = IntentJournal::Open(path_.string());
    EXPECT_TRUE(journal.ok()) << journal.status();
    return journal.ok() ? std::move(*journal) : nullptr;
  }

  std::filesystem::path path_;
  const Intent intent_{"cpu_blocked", 3, Problem{DType::kBF16, 1000, 24, 4095}, "timing",
                       "", 4242, 1700000000};
};

TEST_F(IntentJournalTest, ANewJournalHoldsNothingAndIsOnePage) {
  auto journal = Open();
  ASSERT_NE(journal, nullptr);
  EXPECT_FALSE(journal->leftover().has_value());
  EXPECT_EQ(std::filesystem::file_size(path_), IntentJournal::kRecordBytes);
}

TEST_F(IntentJournalTest, AnIntentLeftByAProcessThatDiedIsWhatTheNextOneReads) {
  Open()->Record(intent_).IgnoreError();  // the process "dies" with it recorded
  auto next = Open();
  ASSERT_TRUE(next->leftover().has_value());
  EXPECT_EQ(*next->leftover(), intent_);
}

TEST_F(IntentJournalTest, ACauseIsAddedToTheRecordedIntentAndSurvivesEscaping) {
  {
    auto journal = Open();
    ASSERT_TRUE(journal->Record(intent_).ok());
    ASSERT_TRUE(journal->SetCause("hung:\nno progress \"for\" 300s").ok());
  }
  auto next = Open();
  ASSERT_TRUE(next->leftover().has_value());
  EXPECT_EQ(next->leftover()->cause, "hung:\nno progress \"for\" 300s");
  EXPECT_EQ(next->leftover()->candidate, "cpu_blocked");
}

TEST_F(IntentJournalTest, AClearedJournalLeavesNothingForTheNextProcess) {
  {
    auto journal = Open();
    ASSERT_TRUE(journal->Record(intent_).ok());
    ASSERT_TRUE(journal->Clear().ok());
  }
  EXPECT_FALSE(Open()->leftover().has_value());
}

TEST_F(IntentJournalTest, ALeftoverStaysRecordedUntilCleared) {
  Open()->Record(intent_).IgnoreError();
  Open();  // a restart that died before acting on it
  EXPECT_TRUE(Open()->leftover().has_value());
}

TEST_F(IntentJournalTest, AFileThisBuildCannotReadIsStartedAfresh) {
  {
    std::ofstream out(path_);
    out << "not a journal\n";
  }
  auto journal = Open();
  ASSERT_NE(journal, nullptr);
  EXPECT_FALSE(journal->leftover().has_value());
  EXPECT_FALSE(Open()->leftover().has_value());
}

TEST(IntentRecordTest, AnOversizedCauseIsCutToFitThePage) {
  Intent i{"c", 1, Problem{DType::kF32, 1, 2, 3}, "oracle", std::string(10000, 'x'), 1, 2};
  const std::string text = FormatIntentRecord(i);
  EXPECT_LE(text.size(), IntentJournal::kRecordBytes);
  absl::StatusOr<std::optional<Intent>> parsed = ParseIntentRecord(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->has_value());
  EXPECT_EQ((*parsed)->candidate, "c");
}

}  // namespace
}  // namespace arbiter
