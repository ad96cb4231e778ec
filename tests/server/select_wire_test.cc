// Select on the wire: the real DispatchService served over gRPC in process, on
// the fake engine backend whose one candidate can be held inside its kernel
// (a Gate) for one bucket's problems, so a measurement is stopped mid-way by
// the test rather than timed. What a client relies on: a Select of a bucket
// with a stored verdict is answered while another bucket's measurement holds
// the only device stream; the reply bytes shared between calls are exactly the
// typed SelectResponse; a changed answer (a force) is never served old bytes;
// bytes that are no SelectRequest are refused.
#include <future>
#include <memory>

#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <gtest/gtest.h>

#include "arbiter/v1/arbiter.grpc.pb.h"
#include "server/convert.h"
#include "server/dispatch_service.h"
#include "server/select_replies.h"
#include "tests/engine/fake_arbiter.h"

namespace arbiter::server {
namespace {

using ::arbiter::testing::Gate;
using google::protobuf::util::MessageDifferencer;

constexpr int64_t kHeldM = 64;  // problems of this M are held at the gate

class SelectWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ArbiterOptions options;
    options.workers = 1;  // one device stream: a measurement holds it
    options.tuning = TuningPolicy::kSync;
    std::vector<CandidateSpec> candidates;
    candidates.push_back(testing::FakeCandidate(
        "gated", 1, testing::GatedKernel(gate_, 1e-6, [](const Problem& p) { return p.m == kHeldM; })));
    auto arbiter = testing::FakeArbiter(options, std::move(candidates));
    ASSERT_TRUE(arbiter.ok()) << arbiter.status();
    arbiter_ = std::move(*arbiter);
    service_ = std::make_unique<DispatchService>(*arbiter_);

    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Dispatch::NewStub(channel_);
  }

  void TearDown() override {
    gate_->Open();
    if (server_) server_->Shutdown();  // waits for every handler to return
  }

  static v1::SelectRequest Request(int64_t m, int64_t n, int64_t k) {
    v1::SelectRequest request;
    request.mutable_problem()->set_dtype(v1::DTYPE_F32);
    request.mutable_problem()->set_m(m);
    request.mutable_problem()->set_n(n);
    request.mutable_problem()->set_k(k);
    return request;
  }

  grpc::Status Select(const v1::SelectRequest& request, v1::SelectResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub_->Select(&context, request, response);
  }

  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::unique_ptr<Arbiter> arbiter_;
  std::unique_ptr<DispatchService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Dispatch::Stub> stub_;
};

TEST_F(SelectWireTest, StoredVerdictIsServedWhileAnotherBucketsMeasurementHoldsTheOnlyStream) {
  const v1::SelectRequest stored = Request(12, 20, 8);
  v1::SelectResponse first;
  ASSERT_TRUE(Select(stored, &first).ok());  // measures (the reply carries the race's costs)
  ASSERT_TRUE(Select(stored, &first).ok());  // the stored verdict's answer
  ASSERT_EQ(first.source(), v1::VERDICT_SOURCE_MEASURED);

  auto measuring = std::async(std::launch::async, [&] {
    v1::SelectResponse response;
    return Select(Request(kHeldM, kHeldM, kHeldM), &response);
  });
  gate_->WaitEntered();  // the other bucket's measurement is inside its kernel, holding the stream

  v1::SelectResponse again;
  const grpc::Status status = Select(stored, &again);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(MessageDifferencer::Equals(again, first));
  EXPECT_EQ(gate_->Entered(), 1) << "the stored verdict's Select measured something";

  gate_->Open();
  const grpc::Status measured = measuring.get();
  EXPECT_TRUE(measured.ok()) << measured.error_message();
}

TEST_F(SelectWireTest, RepliesOnTheWireAreTheTypedResponse) {
  gate_->Open();
  const v1::SelectRequest request = Request(12, 20, 8);
  v1::SelectResponse wire[2];
  ASSERT_TRUE(Select(request, &wire[0]).ok());  // measures: the reply carries the race's costs
  ASSERT_TRUE(Select(request, &wire[0]).ok());  // decided from the stored verdict, remembered
  ASSERT_TRUE(Select(request, &wire[1]).ok());  // the remembered answer's bytes again
  const absl::StatusOr<Selection> selection =
      arbiter_->Select(Problem{DType::kF32, 12, 20, 8}, SelectOptions{});
  ASSERT_TRUE(selection.ok()) << selection.status();
  v1::SelectResponse typed;
  ToProto(*selection, &typed);
  ASSERT_TRUE(typed.has_verdict());
  EXPECT_FALSE(typed.reason().empty());
  for (const v1::SelectResponse& reply : wire) {
    EXPECT_TRUE(MessageDifferencer::Equals(reply, typed))
        << reply.DebugString() << "\nexpected\n" << typed.DebugString();
  }
}

TEST_F(SelectWireTest, AForceIsServedAtOnceNotTheRememberedBytes) {
  gate_->Open();
  const v1::SelectRequest request = Request(12, 20, 8);
  v1::SelectResponse before, after;
  ASSERT_TRUE(Select(request, &before).ok());
  ASSERT_TRUE(Select(request, &before).ok());
  ASSERT_EQ(before.source(), v1::VERDICT_SOURCE_MEASURED);
  ASSERT_TRUE(arbiter_->Force(Problem{DType::kF32, 12, 20, 8}, "gated", "pinned by test").ok());
  ASSERT_TRUE(Select(request, &after).ok());
  EXPECT_EQ(after.source(), v1::VERDICT_SOURCE_FORCED);
  EXPECT_NE(after.reason().find("pinned by test"), std::string::npos) << after.reason();
}

TEST_F(SelectWireTest, BytesThatAreNoSelectRequestAreRefused) {
  const std::string garbage = "\xff\xff\xff";  // a field tag with no end
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1), reply;
  grpc::ClientContext context;
  const grpc::internal::RpcMethod method("/arbiter.v1.Dispatch/Select",
                                         grpc::internal::RpcMethod::NORMAL_RPC, channel_);
  const grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel_.get(), method, &context, request, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("not a SelectRequest"), std::string::npos)
      << status.error_message();
}

// SelectReplies on its own: one serialization per Selection, never another's.
std::shared_ptr<const Selection> MadeSelection(std::string candidate, std::string reason) {
  auto s = std::make_shared<Selection>();
  s->candidate = std::move(candidate);
  s->version = 2;
  s->source = VerdictSource::kMeasured;
  s->reason = std::move(reason);
  return s;
}

v1::SelectResponse Parsed(const grpc::Slice& bytes) {
  v1::SelectResponse out;
  EXPECT_TRUE(out.ParseFromArray(bytes.begin(), static_cast<int>(bytes.size())));
  return out;
}

TEST(SelectRepliesTest, ASelectionsBytesAreBuiltOnceAndShared) {
  SelectReplies replies;
  const auto s = MadeSelection("openblas", "fastest by 12%");
  const grpc::Slice a = replies.Of(s), b = replies.Of(s);
  EXPECT_EQ(a.begin(), b.begin()) << "the second call serialized again";
  v1::SelectResponse expected;
  ToProto(*s, &expected);
  EXPECT_TRUE(MessageDifferencer::Equals(Parsed(a), expected));
}

TEST(SelectRepliesTest, ALaterSelectionIsNeverAnsweredWithAnEarliersBytes) {
  SelectReplies replies;
  for (int i = 0; i < 50; ++i) {  // freed and made again: the allocator reuses addresses
    const auto s = MadeSelection("candidate" + std::to_string(i), "round " + std::to_string(i));
    EXPECT_EQ(Parsed(replies.Of(s)).candidate(), s->candidate);
  }
}

TEST(SelectRepliesTest, StaysWithinItsCapacity) {
  SelectReplies replies(/*capacity=*/4);
  std::vector<std::shared_ptr<const Selection>> live;
  for (int i = 0; i < 10; ++i) {
    live.push_back(MadeSelection("c" + std::to_string(i), ""));
    EXPECT_EQ(Parsed(replies.Of(live.back())).candidate(), live.back()->candidate);
    EXPECT_LE(replies.size(), 4u);
  }
}

}  // namespace
}  // namespace arbiter::server
