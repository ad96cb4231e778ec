// The launch-replay policy (engine/launch_recordings.h) against a recorder that
// counts: which launches run as they are, which are recorded, which replay.
#include "engine/launch_recordings.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace arbiter {
namespace {

// Records a launch as the number of times it had run when recorded; a replay
// appends that number to `replays`.
class CountingRecorder final : public LaunchRecorder {
 public:
  absl::StatusOr<void*> Record(absl::FunctionRef<absl::Status()> launch) override {
    ++records;
    if (refuse) return absl::FailedPreconditionError("not recordable");
    live.push_back(new int(records));
    return static_cast<void*>(live.back());
  }
  absl::Status Replay(void* recording) override {
    replays.push_back(*static_cast<int*>(recording));
    return absl::OkStatus();
  }
  void Destroy(void* recording) override {
    std::erase(live, static_cast<int*>(recording));
    delete static_cast<int*>(recording);
  }

  bool refuse = false;
  int records = 0;
  std::vector<int> replays;
  std::vector<int*> live;  // recordings not destroyed yet
};

struct Fixture {
  CountingRecorder recorder;
  int launched = 0;
  absl::Status Run(LaunchRecordings& r, const LaunchKey& key, uint64_t generation = 0) {
    return r.Launch(key, generation, [&] {
      ++launched;
      return absl::OkStatus();
    });
  }
};

int a_, b_, c_, other_;
const LaunchKey kKey{"cublas", 1, Problem{DType::kBF16, 64, 128, 256}, &a_, &b_, &c_};

TEST(LaunchRecordingsTest, FirstLaunchRunsSecondIsRecordedAndLaterOnesReplay) {
  Fixture f;
  LaunchRecordings r(f.recorder);
  ASSERT_TRUE(f.Run(r, kKey).ok());
  EXPECT_EQ(f.launched, 1);
  EXPECT_EQ(f.recorder.records, 0) << "a key seen once is not worth a recording";
  ASSERT_TRUE(f.Run(r, kKey).ok());
  EXPECT_EQ(f.recorder.records, 1);
  EXPECT_EQ(f.recorder.replays.size(), 1u) << "the recording runs the second launch";
  ASSERT_TRUE(f.Run(r, kKey).ok());
  ASSERT_TRUE(f.Run(r, kKey).ok());
  EXPECT_EQ(f.launched, 1) << "launched again after being recorded";
  EXPECT_EQ(f.recorder.records, 1);
  EXPECT_EQ(f.recorder.replays.size(), 3u);
  EXPECT_EQ(r.counts().direct, 1);
  EXPECT_EQ(r.counts().recorded, 1);
  EXPECT_EQ(r.counts().replayed, 2);
}

TEST(LaunchRecordingsTest, EveryPartOfTheKeyKeepsLaunchesApart) {
  std::vector<LaunchKey> others(6, kKey);
  others[0].candidate = "cublaslt_h0";
  others[1].version = 2;
  others[2].problem.n = 129;
  others[3].a = &other_;
  others[4].b = &other_;
  others[5].c = &other_;
  for (const LaunchKey& other : others) {
    Fixture f;
    LaunchRecordings r(f.recorder);
    ASSERT_TRUE(f.Run(r, kKey).ok());
    ASSERT_TRUE(f.Run(r, kKey).ok());  // recorded
    ASSERT_TRUE(f.Run(r, other).ok());
    EXPECT_EQ(f.launched, 2) << "a launch of another key was served by " << kKey.candidate << "'s recording";
    EXPECT_EQ(f.recorder.replays.size(), 1u);
  }
}

TEST(LaunchRecordingsTest, ANewGenerationDropsEveryRecording) {
  Fixture f;
  LaunchRecordings r(f.recorder);
  ASSERT_TRUE(f.Run(r, kKey, 7).ok());
  ASSERT_TRUE(f.Run(r, kKey, 7).ok());
  ASSERT_EQ(f.recorder.live.size(), 1u);
  ASSERT_TRUE(f.Run(r, kKey, 8).ok());  // the scratch it names moved
  EXPECT_TRUE(f.recorder.live.empty()) << "a recording of the old generation was kept";
  EXPECT_EQ(f.launched, 2) << "the launch after the move ran as it is";
  ASSERT_TRUE(f.Run(r, kKey, 8).ok());
  EXPECT_EQ(f.recorder.records, 2) << "recorded again in the new generation";
}

TEST(LaunchRecordingsTest, ARefusedCandidateAlwaysLaunchesAndIsNotAskedAgain) {
  Fixture f;
  f.recorder.refuse = true;
  LaunchRecordings r(f.recorder);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(f.Run(r, kKey).ok());
  EXPECT_EQ(f.launched, 5) << "every launch must still run";
  EXPECT_EQ(f.recorder.records, 1) << "a refused candidate is not recorded again";
  EXPECT_EQ(r.counts().refused, 1);
  LaunchKey elsewhere = kKey;
  elsewhere.c = &other_;  // the same candidate on other operands: still refused
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.Run(r, elsewhere).ok());
  EXPECT_EQ(f.recorder.records, 1);
}

TEST(LaunchRecordingsTest, KeepsAtMostCapacityDroppingTheLeastRecentlyUsed) {
  Fixture f;
  LaunchRecordings r(f.recorder, /*capacity=*/2);
  int addresses[3];
  std::vector<LaunchKey> keys(3, kKey);
  for (int i = 0; i < 3; ++i) keys[i].c = &addresses[i];
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(f.Run(r, keys[i]).ok());
    ASSERT_TRUE(f.Run(r, keys[i]).ok());
  }
  ASSERT_TRUE(f.Run(r, keys[0]).ok());  // 0 used more recently than 1
  ASSERT_TRUE(f.Run(r, keys[2]).ok());
  ASSERT_TRUE(f.Run(r, keys[2]).ok());  // recorded: 1 is dropped
  EXPECT_EQ(r.size(), 2u);
  EXPECT_EQ(f.recorder.live.size(), 2u) << "a dropped recording was not destroyed";
  const int before = f.launched;
  ASSERT_TRUE(f.Run(r, keys[0]).ok());
  EXPECT_EQ(f.launched, before) << "the most recently used recording was dropped";
  ASSERT_TRUE(f.Run(r, keys[1]).ok());
  EXPECT_EQ(f.launched, before + 1) << "the least recently used recording was kept";
}

TEST(LaunchRecordingsTest, ALaunchErrorIsReturnedAndNothingIsRecorded) {
  CountingRecorder recorder;
  LaunchRecordings r(recorder);
  const auto failing = [] { return absl::InvalidArgumentError("bad launch"); };
  EXPECT_EQ(r.Launch(kKey, 0, failing).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(recorder.records, 0);
}

// A launch that fails fails its recording too (the recorder runs it): that is
// the candidate's error, and the candidate is recorded once a launch succeeds.
TEST(LaunchRecordingsTest, AFailingLaunchDoesNotMarkItsCandidateUnrecordable) {
  CountingRecorder recorder;
  recorder.refuse = true;  // as a capture of a failing launch ends
  LaunchRecordings r(recorder);
  const auto failing = [] { return absl::UnavailableError("device busy"); };
  EXPECT_EQ(r.Launch(kKey, 0, failing).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.Launch(kKey, 0, failing).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(recorder.records, 1);
  EXPECT_EQ(r.counts().refused, 0);
  recorder.refuse = false;
  LaunchKey elsewhere = kKey;
  elsewhere.c = &other_;
  int launched = 0;
  const auto ok = [&] {
    ++launched;
    return absl::OkStatus();
  };
  ASSERT_TRUE(r.Launch(elsewhere, 0, ok).ok());
  ASSERT_TRUE(r.Launch(elsewhere, 0, ok).ok());
  EXPECT_EQ(recorder.records, 2) << "the candidate was never recorded again";
  EXPECT_EQ(launched, 1);
}

TEST(LaunchRecordingsTest, DestroysEveryRecordingWhenDestroyed) {
  Fixture f;
  {
    LaunchRecordings r(f.recorder);
    ASSERT_TRUE(f.Run(r, kKey).ok());
    ASSERT_TRUE(f.Run(r, kKey).ok());
    ASSERT_EQ(f.recorder.live.size(), 1u);
  }
  EXPECT_TRUE(f.recorder.live.empty());
}

}  // namespace
}  // namespace arbiter
