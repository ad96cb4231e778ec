// Completion by event: the per-peer ring of shared events (CompletionTable) -
// a slot is never handed out again before its peer acknowledges it, a failed
// dispatch gives its slot back, a slot keeps what its dispatch held until its
// record is complete - and Arbiter::Dispatch with complete_by_event: the
// kernel's completion is an event recorded after it, not a wait.
#include "engine/completion_table.h"

#include <memory>
#include <vector>

#include "engine/arbiter.h"
#include "gtest/gtest.h"
#include "tests/engine/fake_arbiter.h"

namespace arbiter {
namespace {

using testing::EventLog;
using testing::FakeBackend;
using testing::OneKernelArbiter;
using testing::TimedKernel;

Peer SessionPeer(uint64_t session) {
  Peer p;
  p.session = session;
  p.pid = 100 + static_cast<int>(session);
  p.uid = 1000;
  return p;
}

class CompletionTableTest : public ::testing::Test {
 protected:
  FakeBackend backend_;
  std::shared_ptr<EventLog> log_ = backend_.ShareEvents();
  CompletionTable table_{backend_, /*slots_per_peer=*/4};
  const Peer peer_ = SessionPeer(1);
};

TEST_F(CompletionTableTest, ASlotIsNotHandedOutAgainBeforeItsPeerAcknowledgesIt) {
  std::vector<size_t> slots;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<CompletionTable::Claim> claim = table_.Take(peer_);
    ASSERT_TRUE(claim.ok()) << claim.status();
    slots.push_back(claim->slot());
    claim->Commit({});
  }
  EXPECT_EQ(slots, (std::vector<size_t>{0, 1, 2, 3}));
  const absl::StatusOr<CompletionTable::Claim> full = table_.Take(peer_);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("done_event_slots"), std::string::npos) << full.status();

  ASSERT_TRUE(table_.Acknowledge(peer_, {2}).ok());
  absl::StatusOr<CompletionTable::Claim> again = table_.Take(peer_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->slot(), 2u) << "the acknowledged slot, the only free one";
}

TEST_F(CompletionTableTest, AnotherPeersSlotsAreItsOwn) {
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<CompletionTable::Claim> claim = table_.Take(peer_);
    ASSERT_TRUE(claim.ok());
    claim->Commit({});
  }
  absl::StatusOr<CompletionTable::Claim> other = table_.Take(SessionPeer(2));
  ASSERT_TRUE(other.ok()) << "a full ring of one session takes nothing from another";
  EXPECT_EQ(other->slot(), 0u);
  EXPECT_EQ(table_.Acknowledge(SessionPeer(3), {0}).code(), absl::StatusCode::kInvalidArgument)
      << "a session that never asked for events has nothing to acknowledge";
}

TEST_F(CompletionTableTest, AClaimDroppedUnrecordedFreesItsSlot) {
  {
    absl::StatusOr<CompletionTable::Claim> failed = table_.Take(peer_);
    ASSERT_TRUE(failed.ok());
    EXPECT_EQ(failed->slot(), 0u);
  }  // the dispatch failed before recording: nothing for the client to wait on
  absl::StatusOr<CompletionTable::Claim> next = table_.Take(peer_);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->slot(), 0u);
}

TEST_F(CompletionTableTest, AcknowledgementsOutsideTheRingAreRefusedAndFreeNothing) {
  absl::StatusOr<CompletionTable::Claim> claim = table_.Take(peer_);
  ASSERT_TRUE(claim.ok());
  claim->Commit({});
  const absl::Status bad = table_.Acknowledge(peer_, {0, 4});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("0 <= slot < 4"), std::string::npos) << bad;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<CompletionTable::Claim> c = table_.Take(peer_);
    ASSERT_TRUE(c.ok());
    EXPECT_NE(c->slot(), 0u) << "slot 0 was not freed by the refused acknowledgement";
    c->Commit({});
  }
  EXPECT_EQ(table_.Take(peer_).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(CompletionTableTest, ASlotBeingRecordedCannotBeAcknowledgedFree) {
  absl::StatusOr<CompletionTable::Claim> in_flight = table_.Take(peer_);
  ASSERT_TRUE(in_flight.ok());
  ASSERT_TRUE(table_.Acknowledge(peer_, {0}).ok());  // ignored: no reply named it yet
  absl::StatusOr<CompletionTable::Claim> next = table_.Take(peer_);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->slot(), 1u);
}

TEST_F(CompletionTableTest, ASlotHoldsItsDispatchsRegionsUntilItsRecordIsCompleteAndItIsReused) {
  auto region = std::make_shared<int>(7);
  std::weak_ptr<int> watch = region;
  {
    absl::StatusOr<CompletionTable::Claim> claim = table_.Take(peer_);
    ASSERT_TRUE(claim.ok());
    claim->Commit({std::move(region)});
  }
  EXPECT_FALSE(watch.expired()) << "the kernel may still run: the region stays mapped";
  ASSERT_TRUE(table_.Acknowledge(peer_, {0}).ok());
  EXPECT_FALSE(watch.expired()) << "acknowledged is not complete";
  {
    std::lock_guard lock(log_->mu);
    log_->syncs.clear();
  }
  absl::StatusOr<CompletionTable::Claim> reuse = table_.Take(peer_);
  ASSERT_TRUE(reuse.ok());
  ASSERT_EQ(reuse->slot(), 0u);
  EXPECT_TRUE(watch.expired()) << "released once the slot's last record was waited for";
  std::lock_guard lock(log_->mu);
  EXPECT_EQ(log_->syncs[0], 1) << "the host waited for the previous record before dropping it";
}

TEST_F(CompletionTableTest, SettlingWaitsForThePeersRecordsAndLetsGoOfItsRegionsButNotItsSlots) {
  auto region = std::make_shared<int>(7);
  std::weak_ptr<int> watch = region;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<CompletionTable::Claim> claim = table_.Take(peer_);
    ASSERT_TRUE(claim.ok());
    claim->Commit({region});
  }
  region.reset();
  {
    std::lock_guard lock(log_->mu);
    log_->syncs.clear();
  }
  table_.Settle(SessionPeer(2));  // another peer's: nothing of this one's goes
  EXPECT_FALSE(watch.expired());
  table_.Settle(peer_);  // the peer unregisters a region: its memory is freed next
  EXPECT_TRUE(watch.expired()) << "no slot keeps a region the client is about to free";
  {
    std::lock_guard lock(log_->mu);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(log_->syncs[i], 1) << "slot " << i << " waited for first";
  }
  EXPECT_EQ(table_.Take(peer_).status().code(), absl::StatusCode::kResourceExhausted)
      << "the slots still await acknowledgement";
}

TEST_F(CompletionTableTest, ReleasingAnOwnerWaitsForItsRecordsAndDropsItsHolds) {
  auto region = std::make_shared<int>(7);
  std::weak_ptr<int> watch = region;
  absl::StatusOr<CompletionTable::Claim> claim = table_.Take(peer_);
  ASSERT_TRUE(claim.ok());
  claim->Commit({std::move(region)});
  {
    std::lock_guard lock(log_->mu);
    log_->syncs.clear();
  }
  EXPECT_TRUE(table_.ReleaseOwner(peer_.owner()));
  EXPECT_TRUE(watch.expired());
  {
    std::lock_guard lock(log_->mu);
    EXPECT_EQ(log_->syncs[0], 1);
  }
  EXPECT_FALSE(table_.ReleaseOwner(peer_.owner())) << "released once";
  EXPECT_EQ(table_.Acknowledge(peer_, {0}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CompletionTableWithoutEventsTest, ABackendWithoutSharedEventsRefusesSayingWhy) {
  FakeBackend backend;  // no ShareEvents(): the CPU backend's default
  CompletionTable table(backend);
  const absl::StatusOr<std::vector<std::string>> handles = table.Handles(SessionPeer(1));
  EXPECT_EQ(handles.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(handles.status().message().find("COMPLETION_SYNC"), std::string::npos)
      << handles.status();
  EXPECT_EQ(table.Take(SessionPeer(1)).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Arbiter::Dispatch on operands in a region with complete_by_event.
class DispatchByEventTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = std::make_unique<FakeBackend>();
    log_ = backend->ShareEvents();
    auto arbiter = OneKernelArbiter(std::move(backend), TimedKernel(1e-6));
    ASSERT_TRUE(arbiter.ok()) << arbiter.status();
    arbiter_ = std::move(*arbiter);
    RegionSource source;
    source.bytes = 3 * 4096;
    auto region = arbiter_->regions().Register(peer_, source, "operands");
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = region->id;
  }

  MatmulOperands Operands(bool by_event) const {
    MatmulOperands o;
    o.a_ref = OperandRef{OperandRef::Target::kRegion, region_, 0};
    o.b_ref = OperandRef{OperandRef::Target::kRegion, region_, 4096};
    o.c_ref = OperandRef{OperandRef::Target::kRegion, region_, 8192};
    o.complete_by_event = by_event;
    return o;
  }

  const Problem p_{DType::kF32, 8, 8, 8};
  const Peer peer_ = SessionPeer(1);
  std::shared_ptr<EventLog> log_;
  std::unique_ptr<Arbiter> arbiter_;
  std::string region_;
};

TEST_F(DispatchByEventTest, TheEventIsRecordedAfterTheKernelAndNamedWithoutADeviceTime) {
  absl::StatusOr<DispatchResult> r = arbiter_->Dispatch(p_, {}, peer_, Operands(true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->by_event);
  EXPECT_EQ(r->event_slot, 0u);
  EXPECT_EQ(r->device_seconds, 0) << "the daemon did not wait for the kernel";
  {
    std::lock_guard lock(log_->mu);
    EXPECT_EQ(log_->records[0], 1);
  }
  absl::StatusOr<DispatchResult> next = arbiter_->Dispatch(p_, {}, peer_, Operands(true));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->event_slot, 1u) << "slot 0 is not acknowledged yet";

  MatmulOperands ack = Operands(true);
  ack.done_event_slots = {0};
  absl::StatusOr<DispatchResult> reused = arbiter_->Dispatch(p_, {}, peer_, ack);
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_EQ(reused->event_slot, 0u);
}

TEST_F(DispatchByEventTest, ASyncDispatchWaitsForItsKernelAndRecordsNoEvent) {
  absl::StatusOr<DispatchResult> r = arbiter_->Dispatch(p_, {}, peer_, Operands(false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->by_event);
  EXPECT_GT(r->device_seconds, 0);
  std::lock_guard lock(log_->mu);
  EXPECT_TRUE(log_->records.empty());
}

TEST_F(DispatchByEventTest, CompletionByEventNeedsCInARegion) {
  MatmulOperands o = Operands(true);
  o.c_ref.reset();
  std::vector<uint8_t> c(p_.c_bytes());
  o.c_host = c.data();
  absl::StatusOr<DispatchResult> r = arbiter_->Dispatch(p_, {}, peer_, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("c_ref"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace arbiter
