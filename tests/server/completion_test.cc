// MatmulRequest.completion and GetCompletionEvents on the CPU backend, in-process
// over a Unix socket: SYNC replies say C is complete, EVENT is refused before
// anything runs (the CPU backend has no events to share) and every malformed
// use is refused naming what was expected. The client's acknowledgement
// bookkeeping (client/completion_events.h) is checked with a stand-in for the
// CUDA waits. Completion by event on a GPU: tests/backends/cuda/cuda_regions_test.cc.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/arbiter_client.h"
#include "client/completion_events.h"
#include "client/matmul_check.h"
#include "client/shared_memory.h"
#include "server/daemon.h"

namespace arbiter::server {
namespace {

using client::AlignUp;
using client::ArbiterClient;

class CompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "arbiter-completion-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(system(("mkdir -p '" + dir_ + "'").c_str()), 0);
    address_ = "unix:" + dir_ + "/d.sock";
    DaemonOptions options;
    options.listen = address_;
    options.store_path = ":memory:";
    options.backend = BackendKind::kCpu;
    options.arbiter.tuning = TuningPolicy::kSync;
    // About ordering, not timing: no cache flush per sample (slow under TSan).
    options.arbiter.measure.cold_cache = false;
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    client::ClientOptions o;
    o.server = address_;
    o.deadline_seconds = 30;
    client_ = std::make_unique<ArbiterClient>(o);
    ASSERT_TRUE(client_->OpenSession().ok());
    ASSERT_TRUE(client::SharedMemory::Create(bytes_, "test", &memory_).ok());
    ASSERT_TRUE(client_->RegisterFd(memory_->fd(), v1::REGION_KIND_HOST_MEMFD,
                                    static_cast<int64_t>(bytes_), "operands", &region_)
                    .ok());
    request_.mutable_problem()->set_dtype(v1::DTYPE_F32);
    request_.mutable_problem()->set_m(m_);
    request_.mutable_problem()->set_n(n_);
    request_.mutable_problem()->set_k(k_);
    ops_ = client::RandomOperands(request_.problem(), 5);
    std::memcpy(base() + a_at_, ops_.a.data(), ops_.a.size());
    std::memcpy(base() + b_at_, ops_.b.data(), ops_.b.size());
    Poison();
    for (auto [ref, at] : {std::pair{request_.mutable_a_ref(), a_at_}, {request_.mutable_b_ref(), b_at_},
                           {request_.mutable_c_ref(), c_at_}}) {
      ref->set_region(region_.id());
      ref->set_offset(static_cast<int64_t>(at));
    }
  }

  char* base() { return static_cast<char*>(memory_->data()); }
  void Poison() {
    const float nan = std::nanf("");
    for (int64_t i = 0; i < m_ * n_; ++i) std::memcpy(base() + c_at_ + 4 * i, &nan, 4);
  }
  bool CPoisoned() {
    for (int64_t i = 0; i < m_ * n_; ++i) {
      float v;
      std::memcpy(&v, base() + c_at_ + 4 * i, 4);
      if (!std::isnan(v)) return false;
    }
    return true;
  }

  const int64_t m_ = 13, n_ = 29, k_ = 7;
  const size_t a_at_ = 0, b_at_ = AlignUp(13 * 7 * 4), c_at_ = b_at_ + AlignUp(7 * 29 * 4);
  const size_t bytes_ = c_at_ + 13 * 29 * 4;
  std::string dir_, address_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<ArbiterClient> client_;
  std::unique_ptr<client::SharedMemory> memory_;
  v1::Region region_;
  v1::MatmulRequest request_;
  client::Operands ops_;
};

TEST_F(CompletionTest, ASyncReplySaysCIsCompleteOnArrival) {
  for (v1::Completion completion : {v1::COMPLETION_UNSPECIFIED, v1::COMPLETION_SYNC}) {
    Poison();
    request_.set_completion(completion);
    v1::MatmulResponse response;
    const grpc::Status s = client_->Matmul(request_, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.completion(), v1::COMPLETION_SYNC);
    EXPECT_GT(response.device_seconds(), 0);
    client::CheckOptions all;
    all.samples = 0;
    const client::CheckResult check = client::CheckMatmul(
        request_.problem(), ops_, std::string(base() + c_at_, m_ * n_ * 4),
        client::DefaultBudget(v1::DTYPE_F32), all);
    EXPECT_TRUE(check.passed()) << check.first_failure;
  }
}

TEST_F(CompletionTest, TheCpuBackendRefusesCompletionByEventBeforeAnythingRuns) {
  request_.set_completion(v1::COMPLETION_EVENT);
  v1::MatmulResponse response;
  const grpc::Status s = client_->Matmul(request_, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("cpu backend"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("COMPLETION_SYNC"), std::string::npos) << s.error_message();
  EXPECT_TRUE(CPoisoned()) << "C was written although the call was refused";

  std::vector<std::string> handles;
  const grpc::Status events = client_->GetCompletionEvents(&handles);
  EXPECT_EQ(events.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << events.error_message();
  EXPECT_TRUE(handles.empty());
}

TEST_F(CompletionTest, MalformedCompletionFieldsAreRefusedNamingWhatWasExpected) {
  struct Case {
    const char* what;
    v1::MatmulRequest request;
    grpc::StatusCode code;
    const char* names;
  };
  v1::MatmulRequest unknown = request_;
  unknown.set_completion(static_cast<v1::Completion>(7));
  v1::MatmulRequest inline_c = request_;
  inline_c.clear_c_ref();
  inline_c.set_completion(v1::COMPLETION_EVENT);
  v1::MatmulRequest no_events = request_;
  no_events.add_done_event_slots(0);
  const Case cases[] = {
      {"an unknown completion", unknown, grpc::StatusCode::INVALID_ARGUMENT, "COMPLETION_EVENT"},
      {"EVENT with C in the reply", inline_c, grpc::StatusCode::INVALID_ARGUMENT, "c_ref"},
      {"acknowledging without events", no_events, grpc::StatusCode::INVALID_ARGUMENT,
       "done_event_slots"},
  };
  for (const Case& c : cases) {
    v1::MatmulResponse response;
    const grpc::Status s = client_->Matmul(c.request, &response);
    EXPECT_EQ(s.error_code(), c.code) << c.what << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.names), std::string::npos) << c.what << ": " << s.error_message();
  }
  EXPECT_TRUE(CPoisoned()) << "nothing ran";
}

TEST_F(CompletionTest, CompletionEventsBelongToASession) {
  client::ClientOptions o;
  o.server = address_;
  ArbiterClient sessionless(o);
  std::vector<std::string> handles;
  const grpc::Status s = sessionless.GetCompletionEvents(&handles);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("fd socket"), std::string::npos) << s.error_message();
}

// The CUDA waits replaced by a record of what was waited on.
class RecordingEvents final : public client::CompletionEvents {
 public:
  RecordingEvents() : CompletionEvents(4) {}
  std::vector<int> waited;

 protected:
  grpc::Status Wait(int slot, void* stream) override {
    waited.push_back(slot);
    return grpc::Status::OK;
  }
};

v1::MatmulResponse ByEvent(int slot) {
  v1::MatmulResponse r;
  r.set_completion(v1::COMPLETION_EVENT);
  r.set_event_slot(slot);
  return r;
}

TEST(CompletionEventsClientTest, EachSlotWaitedOnIsAcknowledgedOnceOnTheNextRequest) {
  RecordingEvents events;
  v1::MatmulRequest request;
  events.Prepare(&request);
  EXPECT_EQ(request.completion(), v1::COMPLETION_EVENT);
  EXPECT_EQ(request.done_event_slots_size(), 0) << "nothing waited on yet";

  ASSERT_TRUE(events.Synchronize(ByEvent(2)).ok());
  int stream_stand_in = 0;
  ASSERT_TRUE(events.StreamWait(ByEvent(0), &stream_stand_in).ok());
  EXPECT_EQ(events.waited, (std::vector<int>{2, 0}));
  events.Prepare(&request);
  EXPECT_EQ(std::vector<int>(request.done_event_slots().begin(), request.done_event_slots().end()),
            (std::vector<int>{2, 0}));
  events.Prepare(&request);
  EXPECT_EQ(request.done_event_slots_size(), 0) << "each acknowledged once";
}

TEST(CompletionEventsClientTest, ASyncReplyNeedsNoWaitAndABadSlotIsAnError) {
  RecordingEvents events;
  v1::MatmulResponse sync;
  sync.set_completion(v1::COMPLETION_SYNC);
  EXPECT_TRUE(events.Synchronize(sync).ok());
  EXPECT_TRUE(events.waited.empty());
  EXPECT_EQ(events.Synchronize(ByEvent(4)).error_code(), grpc::StatusCode::INTERNAL)
      << "slot 4 of a ring of 4";
  EXPECT_EQ(events.StreamWait(ByEvent(1), nullptr).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::MatmulRequest request;
  events.Prepare(&request);
  EXPECT_EQ(request.done_event_slots_size(), 0) << "nothing was waited on";
}

}  // namespace
}  // namespace arbiter::server
