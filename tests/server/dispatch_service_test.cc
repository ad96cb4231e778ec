// The Dispatch service: operand checks, and each Matmul's gRPC deadline
// reaching the engine, so a call whose deadline passes while it waits for a
// device stream is never run. The deadline tests serve the real DispatchService
// over gRPC in process, on the fake engine backend with a gated kernel holding
// the only stream, so what waits and what runs is decided by the test.
#include "server/dispatch_service.h"
#include "server/grpc_call.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "arbiter/v1/arbiter.grpc.pb.h"
#include "engine/measurer.h"
#include "tests/engine/fake_arbiter.h"

namespace arbiter::server {
namespace {

using std::chrono::system_clock;
using ::arbiter::testing::Eventually;
using ::arbiter::testing::Gate;

TEST(DispatchServiceTest, OperandSizeErrorNamesTheExpectedBytesAndHowTheyWereComputed) {
  const Problem p{DType::kF32, 64, 32, 16};
  EXPECT_TRUE(CheckOperandBytes("a", p, 64 * 16 * 4).ok());
  const absl::Status a = CheckOperandBytes("a", p, 100);
  EXPECT_EQ(a.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.message().find("a: expected 4096 bytes (m*k*size = 64*16*4"), std::string::npos)
      << a.message();
  EXPECT_NE(a.message().find("got 100"), std::string::npos) << a.message();

  const absl::Status b = CheckOperandBytes("b", Problem{DType::kBF16, 3, 5, 7}, 0);
  EXPECT_NE(b.message().find("b: expected 70 bytes (k*n*size = 7*5*2"), std::string::npos)
      << b.message();
}

TEST(WorkDeadlineTest, CallWithoutADeadlineGivesTheEngineNone) {
  EXPECT_FALSE(WorkDeadline(system_clock::time_point::max()).has_value());
  EXPECT_FALSE(WorkDeadline(grpc::ServerContext().deadline()).has_value());
  const system_clock::time_point t = system_clock::now() + std::chrono::seconds(5);
  EXPECT_EQ(WorkDeadline(t), t);
}

TEST(PeerHostTest, ATcpCallerIsItsAddressWithoutThePort) {
  EXPECT_EQ(PeerHost("ipv4:10.0.0.7:53122"), "ipv4:10.0.0.7");
  EXPECT_EQ(PeerHost("ipv6:[::1]:5555"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("ipv6:%5B::1%5D:5555"), "ipv6:%5B::1%5D");
  EXPECT_EQ(PeerHost("unix:/run/arbiter/arbiter.sock"), "unix:/run/arbiter/arbiter.sock");
}

// The reply bytes MatmulOnWire sends parse as the MatmulResponse a client expects.
std::string Wire(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string wire;
  for (const grpc::Slice& s : slices) wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return wire;
}

TEST(MatmulReplyBytesTest, ParseAsTheResponseWithCInPlace) {
  v1::MatmulResponse fields;
  fields.set_candidate("mma_tiled");
  fields.set_candidate_version(3);
  fields.set_source(v1::VERDICT_SOURCE_MEASURED);
  fields.set_device_seconds(1.5e-4);
  fields.set_bucket("f32 m:64-127 n:256 k:256");
  std::string c(70000, '\0');  // a length of three varint bytes
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<char>(i * 7);
  v1::MatmulResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(Wire(MatmulReplyBytes(fields, grpc::Slice(c)))));
  v1::MatmulResponse expected = fields;
  expected.set_c(c);
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());

  ASSERT_TRUE(parsed.ParseFromString(Wire(MatmulReplyBytes(fields, grpc::Slice()))));
  EXPECT_TRUE(parsed.c().empty());
  EXPECT_EQ(parsed.candidate(), "mma_tiled");
}

class DispatchDeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ArbiterOptions options;
    options.workers = 1;
    options.tuning = TuningPolicy::kOff;  // one kernel run per Matmul, no measurement
    std::vector<CandidateSpec> candidates;
    candidates.push_back(testing::FakeCandidate("gated", 1, testing::GatedKernel(gate_)));
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
    stub_ = v1::Dispatch::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                      grpc::InsecureChannelCredentials()));

    request_.mutable_problem()->set_dtype(v1::DTYPE_F32);
    request_.mutable_problem()->set_m(12);
    request_.mutable_problem()->set_n(20);
    request_.mutable_problem()->set_k(8);
    std::vector<float> a(12 * 8), b(8 * 20);
    FillRandom(DType::kF32, a.data(), a.size(), 21);
    FillRandom(DType::kF32, b.data(), b.size(), 22);
    request_.set_a(a.data(), a.size() * sizeof(float));
    request_.set_b(b.data(), b.size() * sizeof(float));
  }

  void TearDown() override {
    gate_->Open();
    if (server_) server_->Shutdown();  // waits for every handler to return
  }

  // A Matmul on its own thread; `deadline` unset: none.
  std::future<grpc::Status> MatmulInBackground(std::optional<system_clock::time_point> deadline) {
    return std::async(std::launch::async, [this, deadline] {
      grpc::ClientContext context;
      if (deadline) context.set_deadline(*deadline);
      v1::MatmulResponse response;
      return stub_->Matmul(&context, request_, &response);
    });
  }

  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::unique_ptr<Arbiter> arbiter_;
  std::unique_ptr<DispatchService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Dispatch::Stub> stub_;
  v1::MatmulRequest request_;
};

TEST_F(DispatchDeadlineTest, MatmulWithAFutureDeadlineRuns) {
  gate_->Open();
  const grpc::Status status =
      MatmulInBackground(system_clock::now() + std::chrono::minutes(5)).get();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(gate_->Entered(), 1);
}

TEST_F(DispatchDeadlineTest, MatmulWhoseDeadlinePassesWhileQueuedIsNeverRun) {
  auto holder = MatmulInBackground(std::nullopt);
  gate_->WaitEntered();  // the only device stream is taken

  const system_clock::time_point deadline = system_clock::now() + std::chrono::milliseconds(300);
  auto late = MatmulInBackground(deadline);
  ASSERT_TRUE(Eventually([&] { return arbiter_->queue_depth() == 1; }))
      << "the second Matmul never queued for the device stream";
  EXPECT_EQ(late.get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The client gave up at its deadline; the server's copy of it (sent as a
  // timeout, received a little later) must have passed too before the stream
  // frees up. Waiting on the clock is the point here, not synchronization.
  ASSERT_TRUE(Eventually([&] { return system_clock::now() > deadline + std::chrono::seconds(1); }));
  gate_->Open();

  EXPECT_TRUE(holder.get().ok());
  server_->Shutdown();  // the queued handler has returned once this does
  server_.reset();
  EXPECT_EQ(gate_->Entered(), 1) << "the expired Matmul's kernel ran after its deadline";
  EXPECT_EQ(arbiter_->queue_depth(), 0u);
}

}  // namespace
}  // namespace arbiter::server
