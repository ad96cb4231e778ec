#include "engine/quarantine.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace arbiter {
namespace {

constexpr char kDevice[] = "fake device|fake";
constexpr char kBucketText[] = "m(32,64]a8.n(32,64]a8.k(32,64]a8";

const Problem kF32{DType::kF32, 64, 64, 64};    // in kBucketText
const Problem kF32Other{DType::kF32, 8, 8, 8};  // another bucket
const Problem kF16{DType::kF16, 64, 64, 64};

CandidateSpec Spec(std::string name, int version = 2) {
  CandidateSpec c;
  c.name = std::move(name);
  c.version = version;
  c.tier = 2;
  return c;
}

bool Covers(const Quarantine& q, const CandidateSpec& c, const Problem& p) {
  return q.Covers(c, p.dtype, BucketOf(p));
}

TEST(QuarantineScopeTest, ParsesEachOfTheThreeFormsAndPrintsThemBack) {
  const std::string bucket_scope = absl::StrCat("f32/", kBucketText);
  for (const std::string& text : {std::string("*"), std::string("bf16"), bucket_scope}) {
    absl::StatusOr<QuarantineScope> s = QuarantineScope::Parse(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status();
    EXPECT_EQ(s->ToString(), text);
  }
  EXPECT_TRUE(QuarantineScope::Parse("*")->everywhere());
  EXPECT_EQ(*QuarantineScope::Parse("bf16"), QuarantineScope::OfDType(DType::kBF16));
  EXPECT_EQ(*QuarantineScope::Parse(bucket_scope), QuarantineScope::OfBucket(BucketKeyOf(kF32)));
}

TEST(QuarantineScopeTest, ParseErrorsNameTheExpectedFormsAndWhatCame) {
  for (const char* text : {"", "F32", "fp8", "f32/", "f32/m(32,64]a8", "f32/m(32,64]a8.n(32,64]a8.k(33,64]a8",
                           "*/m(32,64]a8.n(32,64]a8.k(32,64]a8", "f32 "}) {
    absl::StatusOr<QuarantineScope> s = QuarantineScope::Parse(text);
    ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << "\"" << text << "\"";
    const std::string message(s.status().message());
    EXPECT_NE(message.find("expected \"*\", a dtype (f32, f64, f16, bf16) or \"dtype/bucket\""),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(absl::StrCat("got \"", text, "\"")), std::string::npos) << message;
  }
}

TEST(QuarantineScopeTest, EachScopeCoversExactlyWhatItNames) {
  const QuarantineScope everywhere = QuarantineScope::Everywhere();
  const QuarantineScope f32 = QuarantineScope::OfDType(DType::kF32);
  const QuarantineScope bucket = QuarantineScope::OfBucket(BucketKeyOf(kF32));
  for (const Problem& p : {kF32, kF32Other, kF16}) {
    EXPECT_TRUE(everywhere.Covers(p.dtype, BucketOf(p))) << p;
  }
  EXPECT_TRUE(f32.Covers(kF32.dtype, BucketOf(kF32)));
  EXPECT_TRUE(f32.Covers(kF32Other.dtype, BucketOf(kF32Other)));
  EXPECT_FALSE(f32.Covers(kF16.dtype, BucketOf(kF16)));
  EXPECT_TRUE(bucket.Covers(kF32.dtype, BucketOf(kF32)));
  EXPECT_FALSE(bucket.Covers(kF32Other.dtype, BucketOf(kF32Other)));
  EXPECT_FALSE(bucket.Covers(kF16.dtype, BucketOf(kF16)));  // same shape, other dtype
}

class QuarantineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = VerdictStore::Open(":memory:");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::unique_ptr<Quarantine> Load() {
    auto q = Quarantine::Create(*store_, kDevice);
    EXPECT_TRUE(q.ok()) << q.status();
    return q.ok() ? std::move(*q) : nullptr;
  }
  absl::Status Store(const std::string& candidate, int version, const std::string& scope,
                     const std::string& fingerprint = kDevice) {
    return store_->PutQuarantine(QuarantineEntry{candidate, version, scope, fingerprint,
                                                 "evidence", 1713000000});
  }

  std::unique_ptr<VerdictStore> store_;
};

TEST_F(QuarantineTest, AnAddedEntryAppliesAtOnceAndIsStored) {
  auto q = Load();
  const CandidateSpec splitk = Spec("splitk");
  ASSERT_FALSE(Covers(*q, splitk, kF32));
  ASSERT_TRUE(q->Add("splitk", 2, QuarantineScope::OfBucket(BucketKeyOf(kF32)), "drifted").ok());
  EXPECT_TRUE(Covers(*q, splitk, kF32));
  EXPECT_FALSE(Covers(*q, splitk, kF32Other));
  EXPECT_FALSE(Covers(*q, Spec("tiled"), kF32));
  absl::StatusOr<std::vector<QuarantineEntry>> listed = q->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].scope, absl::StrCat("f32/", kBucketText));
  EXPECT_EQ((*listed)[0].reason, "drifted");
}

TEST_F(QuarantineTest, StoredEntriesOfThisDeviceApplyOnLoad) {
  ASSERT_TRUE(Store("splitk", 2, "f16").ok());
  ASSERT_TRUE(Store("tiled", 2, "*", "another device").ok());
  auto q = Load();
  EXPECT_TRUE(Covers(*q, Spec("splitk"), kF16));
  EXPECT_FALSE(Covers(*q, Spec("splitk"), kF32));
  EXPECT_FALSE(Covers(*q, Spec("tiled"), kF32));  // quarantined on another device only
}

TEST_F(QuarantineTest, AnEntryBindsItsVersionAndVersionZeroBindsEvery) {
  ASSERT_TRUE(Store("splitk", 2, "*").ok());
  ASSERT_TRUE(Store("tiled", 0, "*").ok());
  auto q = Load();
  EXPECT_TRUE(Covers(*q, Spec("splitk", 2), kF32));
  EXPECT_FALSE(Covers(*q, Spec("splitk", 3), kF32));  // a new version is not the one caught
  EXPECT_TRUE(Covers(*q, Spec("tiled", 7), kF32));
  EXPECT_EQ(q->EntriesFor(Spec("splitk", 3)).size(), 0u);
  ASSERT_EQ(q->EntriesFor(Spec("splitk", 2)).size(), 1u);
  EXPECT_TRUE(q->EntriesFor(Spec("splitk", 2))[0].scope.everywhere());
}

TEST_F(QuarantineTest, AStoredScopeThatDoesNotParseAppliesNowhere) {
  ASSERT_TRUE(Store("splitk", 2, "F32").ok());
  auto q = Load();
  EXPECT_FALSE(Covers(*q, Spec("splitk"), kF32));
  EXPECT_TRUE(q->EntriesFor(Spec("splitk")).empty());
}

TEST_F(QuarantineTest, ClearLiftsTheNamedCandidateOrEveryone) {
  auto q = Load();
  ASSERT_TRUE(q->Add("splitk", 2, QuarantineScope::Everywhere(), "a").ok());
  ASSERT_TRUE(q->Add("tiled", 2, QuarantineScope::OfDType(DType::kF32), "b").ok());
  absl::StatusOr<int> removed = q->Clear("splitk");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1);
  EXPECT_FALSE(Covers(*q, Spec("splitk"), kF32));
  EXPECT_TRUE(Covers(*q, Spec("tiled"), kF32));
  removed = q->Clear("");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1);
  EXPECT_FALSE(Covers(*q, Spec("tiled"), kF32));
}

TEST_F(QuarantineTest, TheObserverHearsOfEachAddedEntry) {
  struct Recorder : ArbiterObserver {
    std::vector<QuarantineEntry> seen;
    void OnQuarantine(const QuarantineEntry& q) override { seen.push_back(q); }
  } recorder;
  auto q = Load();
  q->set_observer(&recorder);
  ASSERT_TRUE(q->Add("splitk", 2, QuarantineScope::OfDType(DType::kBF16), "nondeterministic").ok());
  ASSERT_EQ(recorder.seen.size(), 1u);
  EXPECT_EQ(recorder.seen[0].candidate, "splitk");
  EXPECT_EQ(recorder.seen[0].version, 2);
  EXPECT_EQ(recorder.seen[0].scope, "bf16");
  EXPECT_EQ(recorder.seen[0].fingerprint, kDevice);
}

}  // namespace
}  // namespace arbiter
