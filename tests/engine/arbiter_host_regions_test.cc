// Arbiter::Dispatch on a host region of a device backend (Buffer::host_side:
// a client's memfd that the CUDA backend page-locks): A and B are copied from
// the region to device buffers and C back into it, the kernel never addresses
// the region, and what needs C on the device (completion by event) is refused
// before anything runs.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/arbiter.h"
#include "engine/dtype.h"
#include "engine/random_fill.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_arbiter.h"

namespace arbiter {
namespace {

using testing::FakeBackend;
using testing::FakeStream;
using testing::NaiveGemm;
using testing::OneKernelArbiter;

// The addresses every launch was given.
struct Launches {
  std::mutex mu;
  std::vector<GemmArgs> args;
};

class HostRegionDispatchTest : public ::testing::Test {
 protected:
  static constexpr int64_t kStride = 4096;  // A, B and C each start a 4 KiB slot

  void SetUp() override {
    auto backend = std::make_unique<FakeBackend>();
    backend->ShareEvents();  // maps regions, and has events to refuse
    backend->MapRegionsHostSide();
    auto arbiter = OneKernelArbiter(std::move(backend), [launches = launches_](const GemmArgs& args) {
      {
        std::lock_guard lock(launches->mu);
        launches->args.push_back(args);
      }
      NaiveGemm(args, args.problem.k, args.problem.m);
      static_cast<FakeStream*>(args.stream)->Advance(1e-6);
      return absl::OkStatus();
    });
    ASSERT_TRUE(arbiter.ok()) << arbiter.status();
    arbiter_ = std::move(*arbiter);
    RegionSource source;
    source.bytes = 3 * kStride;
    auto region = arbiter_->regions().Register(peer_, source, "host operands");
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = region->id;
    auto found = arbiter_->regions().Find(peer_, region_);
    ASSERT_TRUE(found.ok()) << found.status();
    base_ = static_cast<uint8_t*>(const_cast<Region&>(**found).memory->data());
    FillRandom(p_.dtype, base_, static_cast<size_t>(p_.m * p_.k), 1);
    FillRandom(p_.dtype, base_ + kStride, static_cast<size_t>(p_.k * p_.n), 2);
    std::memset(base_ + 2 * kStride, 0xff, p_.c_bytes());  // NaN: C not written fails
  }

  MatmulOperands Operands() const {
    MatmulOperands o;
    o.a_ref = OperandRef{OperandRef::Target::kRegion, region_, 0};
    o.b_ref = OperandRef{OperandRef::Target::kRegion, region_, kStride};
    o.c_ref = OperandRef{OperandRef::Target::kRegion, region_, 2 * kStride};
    return o;
  }
  size_t LaunchCount() {
    std::lock_guard lock(launches_->mu);
    return launches_->args.size();
  }
  bool InRegion(const void* p) const {
    const auto* q = static_cast<const uint8_t*>(p);
    return q >= base_ && q < base_ + 3 * kStride;
  }

  const Problem p_{DType::kF32, 12, 20, 16};  // M != N: rows and columns not swapped
  const Peer peer_{.session = 1, .pid = 101, .uid = 1000};
  std::shared_ptr<Launches> launches_ = std::make_shared<Launches>();
  std::unique_ptr<Arbiter> arbiter_;
  std::string region_;
  uint8_t* base_ = nullptr;
};

TEST_F(HostRegionDispatchTest, OperandsAreCopiedToTheDeviceAndCBackIntoTheRegion) {
  absl::StatusOr<DispatchResult> r = arbiter_->Dispatch(p_, {}, peer_, Operands());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->by_event);
  EXPECT_TRUE(r->c.empty()) << "C went to the region, not into the reply";
  {
    std::lock_guard lock(launches_->mu);
    ASSERT_EQ(launches_->args.size(), 1u);
    const GemmArgs& launched = launches_->args[0];
    EXPECT_FALSE(InRegion(launched.a)) << "the kernel read A from host memory";
    EXPECT_FALSE(InRegion(launched.b)) << "the kernel read B from host memory";
    EXPECT_FALSE(InRegion(launched.c)) << "the kernel wrote C into host memory";
  }
  // C in the region is the product of the region's A and B.
  std::vector<float> want(static_cast<size_t>(p_.m * p_.n));
  NaiveGemm(GemmArgs{p_, base_, base_ + kStride, want.data(), nullptr}, p_.k, p_.m);
  for (int64_t i = 0; i < p_.m * p_.n; ++i) {
    const double got = LoadAsDouble(p_.dtype, base_ + 2 * kStride, i);
    ASSERT_TRUE(std::isfinite(got)) << "C[" << i << "] not written";
    EXPECT_EQ(got, want[i]) << "C[" << i << "]";
  }
}

TEST_F(HostRegionDispatchTest, ASecondDispatchReadsTheRegionsNewContents) {
  ASSERT_TRUE(arbiter_->Dispatch(p_, {}, peer_, Operands()).ok());
  FillRandom(p_.dtype, base_, static_cast<size_t>(p_.m * p_.k), 3);  // a new A, same addresses
  ASSERT_TRUE(arbiter_->Dispatch(p_, {}, peer_, Operands()).ok());
  std::vector<float> want(static_cast<size_t>(p_.m * p_.n));
  NaiveGemm(GemmArgs{p_, base_, base_ + kStride, want.data(), nullptr}, p_.k, p_.m);
  for (int64_t i = 0; i < p_.m * p_.n; ++i) {
    EXPECT_EQ(LoadAsDouble(p_.dtype, base_ + 2 * kStride, i), want[i]) << "C[" << i << "]";
  }
}

TEST_F(HostRegionDispatchTest, CompletionByEventIsRefusedForCInHostMemoryBeforeAnyLaunch) {
  MatmulOperands o = Operands();
  o.complete_by_event = true;
  absl::StatusOr<DispatchResult> r = arbiter_->Dispatch(p_, {}, peer_, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("host memory"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find(region_), std::string::npos) << r.status();
  EXPECT_EQ(LaunchCount(), 0u);
}

TEST_F(HostRegionDispatchTest, COverlappingAInTheRegionIsRefusedBeforeAnyLaunch) {
  MatmulOperands o = Operands();
  o.c_ref->offset = 256;  // inside A's 12 * 16 * 4 = 768 bytes
  absl::StatusOr<DispatchResult> r = arbiter_->Dispatch(p_, {}, peer_, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("overlap a"), std::string::npos) << r.status();
  EXPECT_EQ(LaunchCount(), 0u);
}

TEST_F(HostRegionDispatchTest, OutOfBoundsAndMisalignedOffsetsAreRefusedBeforeAnyLaunch) {
  MatmulOperands past = Operands();
  past.b_ref->offset = 3 * kStride - 256;  // B's 1280 bytes run past the region's end
  absl::StatusOr<DispatchResult> r = arbiter_->Dispatch(p_, {}, peer_, past);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("must lie within it"), std::string::npos) << r.status();

  MatmulOperands odd = Operands();
  odd.a_ref->offset = 4;
  r = arbiter_->Dispatch(p_, {}, peer_, odd);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("multiple of 256"), std::string::npos) << r.status();
  EXPECT_EQ(LaunchCount(), 0u);
}

}  // namespace
}  // namespace arbiter
