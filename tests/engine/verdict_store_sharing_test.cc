// The store contract, what daemons sharing one store rely on: only an identical
// device fingerprint shares verdicts, a lease is exclusive across daemons and
// outlives no dead connection, every change reaches the other daemons'
// subscriptions (fixture: verdict_store_contract.h; SQLite skips what only a
// shared store promises).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/store_test_util.h"
#include "tests/engine/verdict_store_contract.h"

namespace arbiter::testing {
namespace {

// The contract fixture under its own suite name: a typed suite is registered once.
template <typename Stores>
class VerdictStoreSharingTest : public VerdictStoreContractTest<Stores> {};
TYPED_TEST_SUITE(VerdictStoreSharingTest, StoreKinds, StoreNames);

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

TYPED_TEST(VerdictStoreSharingTest, OnlyAnIdenticalFingerprintSharesVerdictsForcesAndQuarantine) {
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

TYPED_TEST(VerdictStoreSharingTest, LeaseIsExclusiveUntilReleased) {
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

TYPED_TEST(VerdictStoreSharingTest, AShapesLeaseIsApartFromItsBucketsAndFromOtherShapes) {
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

TYPED_TEST(VerdictStoreSharingTest, LeaseIsExclusiveAcrossDaemons) {
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

TYPED_TEST(VerdictStoreSharingTest, LeaseOfADaemonWhoseConnectionDiedIsGrantedToAnother) {
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

TYPED_TEST(VerdictStoreSharingTest, EveryChangeReachesTheOtherDaemonsSubscription) {
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
