// Several engines ("daemons") on one PostgreSQL store, in one process: what a
// fleet relies on - a bucket measured once and served everywhere, an operator's
// change reaching every daemon, nothing shared across fingerprints.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/arbiter.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_backend.h"
#include "tests/engine/postgres_server.h"

namespace arbiter {
namespace {

using testing::FakeBackend;
using testing::FakeCandidate;
using testing::Eventually;
using testing::Gate;
using testing::PostgresServer;
using testing::SharedPostgresServer;
using testing::TimedKernel;
using testing::GatedKernel;

// Counts the engine's lease waits, so a test can tell "waiting on another daemon".
class LeaseWaits final : public ArbiterObserver {
 public:
  void OnLeaseWait(const Problem&) override {
    std::lock_guard lock(mu_);
    ++waits_;
    cv_.notify_all();
  }
  // Whether `n` waits were seen before `timeout`.
  bool AwaitAtLeast(int n, std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return waits_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waits_ = 0;
};

class ArbiterFleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    server_ = SharedPostgresServer(&why);
    if (server_ == nullptr) GTEST_SKIP() << why;
    absl::StatusOr<std::string> database = server_->EmptyStoreDatabase();
    ASSERT_TRUE(database.ok()) << database.status();
    uri_ = server_->Uri(*database);
    options_.measure.min_samples = 5;
    options_.measure.max_samples = 9;
    options_.measure.warmup_runs = 1;
  }

  // A daemon on the shared store: a fake device named `device`, these candidates.
  std::unique_ptr<Arbiter> Daemon(std::vector<CandidateSpec> candidates,
                                  const std::string& device = "fake device",
                                  TuningPolicy tuning = TuningPolicy::kSync) {
    auto backend = std::make_unique<FakeBackend>(device);
    auto registry = Registry::Create(std::move(candidates), *backend);
    EXPECT_TRUE(registry.ok()) << registry.status();
    StoreOptions store_options;
    store_options.password_file = server_->password_file();
    store_options.origin = "daemon-" + std::to_string(++daemons_);
    auto store = VerdictStore::Open(uri_, store_options);
    EXPECT_TRUE(store.ok()) << store.status();
    ArbiterOptions options = options_;
    options.tuning = tuning;
    auto arbiter =
        Arbiter::Create(options, std::move(backend), std::move(*registry), std::move(*store));
    EXPECT_TRUE(arbiter.ok()) << arbiter.status();
    return std::move(*arbiter);
  }

  // fast (tier 1, 10us) and vendor (tier 3, 100us): measuring picks fast, the tier
  // default is vendor.
  static std::vector<CandidateSpec> Standard() {
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("fast", 1, TimedKernel(10e-6, 0.01)));
    c.push_back(FakeCandidate("vendor", 3, TimedKernel(100e-6, 0.01)));
    return c;
  }

  static VerdictSource SourceOf(Arbiter& a, const Problem& p) {
    absl::StatusOr<Selection> s = a.Select(p, {});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->source : VerdictSource::kTierDefault;
  }

  PostgresServer* server_ = nullptr;
  std::string uri_;
  ArbiterOptions options_;
  int daemons_ = 0;
  const Problem p_{DType::kF32, 24, 40, 64};
};

TEST_F(ArbiterFleetTest, AVerdictMeasuredByOneDaemonIsServedByAnotherWithoutMeasuring) {
  auto a = Daemon(Standard());
  auto b = Daemon(Standard(), "fake device", TuningPolicy::kOff);
  absl::StatusOr<Verdict> tuned = a->Tune(p_);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  absl::StatusOr<Selection> s = b->Select(p_, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->source, VerdictSource::kMeasured);
  EXPECT_EQ(s->candidate, tuned->winner);
  EXPECT_EQ(b->measurements(), 0);
}

TEST_F(ArbiterFleetTest, DaemonsWhoseFingerprintsDifferNeverShareAVerdictOrAForce) {
  auto a = Daemon(Standard(), "fake device");
  auto other = Daemon(Standard(), "another fake device", TuningPolicy::kOff);
  ASSERT_TRUE(a->Tune(p_).ok());
  ASSERT_TRUE(a->Force(Problem{DType::kF32, 200, 200, 200}, "vendor", "pinned").ok());
  EXPECT_EQ(SourceOf(*other, p_), VerdictSource::kTierDefault);
  EXPECT_EQ(SourceOf(*other, Problem{DType::kF32, 200, 200, 200}), VerdictSource::kTierDefault);
  absl::StatusOr<std::vector<Verdict>> verdicts = other->ListVerdicts({});
  ASSERT_TRUE(verdicts.ok()) << verdicts.status();
  EXPECT_TRUE(verdicts->empty());
}

TEST_F(ArbiterFleetTest, ConcurrentFirstRequestsOnThreeDaemonsMeasureTheBucketOnce) {
  auto gate = std::make_shared<Gate>();
  auto gated = [gate] {
    std::vector<CandidateSpec> c;
    c.push_back(FakeCandidate("gated", 2, GatedKernel(gate, 5e-6)));
    return c;
  };
  std::vector<std::unique_ptr<Arbiter>> fleet;
  for (int i = 0; i < 3; ++i) fleet.push_back(Daemon(gated()));
  LeaseWaits waits;
  for (auto& d : fleet) d->set_observer(&waits);

  std::atomic<int> measured{0};
  std::vector<std::thread> clients;
  auto client = [&](Arbiter* d) {
    absl::StatusOr<Selection> s = d->Select(p_, {});
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok() && s->source == VerdictSource::kMeasured) ++measured;
  };
  clients.emplace_back(client, fleet[0].get());
  gate->WaitEntered();  // daemon 0 holds the lease and measures
  for (int i = 1; i < 3; ++i) {
    clients.emplace_back(client, fleet[i].get());
    clients.emplace_back(client, fleet[i].get());
  }
  // Daemons 1 and 2 each wait on daemon 0's lease (their second request waits on their
  // first) instead of measuring the bucket themselves.
  const bool waited = waits.AwaitAtLeast(2, std::chrono::seconds(30));
  gate->Open();
  for (auto& t : clients) t.join();
  EXPECT_TRUE(waited);
  EXPECT_EQ(measured.load(), 5);
  EXPECT_EQ(fleet[0]->measurements() + fleet[1]->measurements() + fleet[2]->measurements(), 1);
}

TEST_F(ArbiterFleetTest, ForceUnforceAndInvalidateThroughOneDaemonReachTheOther) {
  auto a = Daemon(Standard());
  auto b = Daemon(Standard(), "fake device", TuningPolicy::kOff);
  ASSERT_TRUE(a->Tune(p_).ok());
  ASSERT_EQ(SourceOf(*b, p_), VerdictSource::kMeasured);  // now in b's cache

  ASSERT_TRUE(a->Force(p_, "vendor", "fleet-wide pin").ok());
  EXPECT_TRUE(Eventually([&] { return SourceOf(*b, p_) == VerdictSource::kForced; }));
  ASSERT_TRUE(a->Unforce(p_).ok());
  EXPECT_TRUE(Eventually([&] { return SourceOf(*b, p_) == VerdictSource::kMeasured; }));

  InvalidateScope scope;
  scope.dtype = p_.dtype;
  absl::StatusOr<int> removed = a->Invalidate(scope);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_TRUE(Eventually([&] { return SourceOf(*b, p_) == VerdictSource::kTierDefault; }));
}

TEST_F(ArbiterFleetTest, AQuarantineThroughOneDaemonReachesTheOther) {
  auto a = Daemon(Standard());
  auto b = Daemon(Standard(), "fake device", TuningPolicy::kOff);
  ASSERT_TRUE(a->Quarantine("vendor", QuarantineScope::Everywhere(), "wrong results").ok());
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<Selection> s = b->Select(p_, {});
    return s.ok() && s->candidate == "fast";  // vendor, the tier default, is withheld
  }));
}

TEST_F(ArbiterFleetTest, NodeScopedChangesStayOnTheirDaemon) {
  auto a = Daemon(Standard());
  auto b = Daemon(Standard(), "fake device", TuningPolicy::kOff);
  ASSERT_TRUE(a->Tune(p_).ok());
  ASSERT_TRUE(a->Force(p_, "vendor", "this node only", Reach::kNode).ok());
  EXPECT_EQ(SourceOf(*a, p_), VerdictSource::kForced);
  EXPECT_EQ(SourceOf(*b, p_), VerdictSource::kMeasured);
  absl::StatusOr<std::vector<Forces::Entry>> forces_on_b = b->ListForces();
  ASSERT_TRUE(forces_on_b.ok()) << forces_on_b.status();
  EXPECT_TRUE(forces_on_b->empty());
  ASSERT_TRUE(a->Unforce(p_, Reach::kNode).ok());

  // Invalidated on a alone: a measures the bucket again and keeps it; b still serves
  // the store's verdict, which stays.
  InvalidateScope scope;
  scope.dtype = p_.dtype;
  absl::StatusOr<int> removed = a->Invalidate(scope, Reach::kNode);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  const int64_t before = a->measurements();
  EXPECT_EQ(SourceOf(*a, p_), VerdictSource::kMeasured);
  EXPECT_EQ(a->measurements(), before + 1);
  EXPECT_EQ(SourceOf(*b, p_), VerdictSource::kMeasured);
  absl::StatusOr<int64_t> count = b->CountVerdicts();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 1);
}

TEST_F(ArbiterFleetTest, AWaitOnAnotherDaemonsLeaseEndsAtTheRequestsDeadline) {
  auto b = Daemon(Standard());
  // Another daemon holds the bucket's lease and never finishes.
  StoreOptions holder_options;
  holder_options.password_file = server_->password_file();
  auto holder = VerdictStore::Open(uri_, holder_options);
  ASSERT_TRUE(holder.ok()) << holder.status();
  FakeBackend device;
  const BucketKey key = BucketKeyOf(p_);
  auto lease = (*holder)->TryLease(device.info().Fingerprint(), key.dtype, key.bucket);
  ASSERT_TRUE(lease.ok() && *lease != nullptr);

  SelectOptions options;
  options.deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(300);
  absl::StatusOr<Selection> waited = b->Select(p_, options);
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded) << waited.status();
  EXPECT_EQ(b->measurements(), 0);

  lease->reset();  // the holder gave up: the bucket is b's to measure
  EXPECT_EQ(SourceOf(*b, p_), VerdictSource::kMeasured);
  EXPECT_EQ(b->measurements(), 1);
}

}  // namespace
}  // namespace arbiter
