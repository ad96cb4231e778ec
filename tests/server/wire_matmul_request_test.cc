// The wire's Matmul request, read raw: fields as protobuf reads them, A and B
// left in the message's slices and gathered in order, and malformed bytes
// refused as protobuf would refuse them; then through a daemon on the CPU
// backend, where a request arrives in many slices and raw bytes that are no
// request are refused with the right status.
#include "server/wire_matmul_request.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "client/arbiter_client.h"
#include "client/matmul_check.h"
#include "engine/measurer.h"
#include "server/daemon.h"

namespace arbiter::server {
namespace {

// `bytes` cut into slices of `piece` bytes (the last may be shorter).
std::vector<grpc::Slice> Cut(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    slices.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
  }
  return slices;
}

std::string Joined(const std::vector<HostPiece>& pieces) {
  std::string out;
  for (const HostPiece& p : pieces) out.append(static_cast<const char*>(p.data), p.bytes);
  return out;
}

std::string Pattern(size_t bytes, int seed) {
  std::string s(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) s[i] = static_cast<char>((i * 131 + seed) % 251);
  return s;
}

v1::MatmulRequest Request() {
  v1::MatmulRequest r;
  r.mutable_problem()->set_dtype(v1::DTYPE_F32);
  r.mutable_problem()->set_m(3);
  r.mutable_problem()->set_n(70);
  r.mutable_problem()->set_k(40);
  r.set_a(Pattern(3 * 40 * 4, 1));
  r.set_b(Pattern(40 * 70 * 4, 2));  // a length of two varint bytes
  r.set_required_determinism(v1::DETERMINISM_RUN_TO_RUN);
  r.set_tuning(v1::TUNING_POLICY_OFF);
  r.mutable_c_ref()->set_region("r-7");
  r.mutable_c_ref()->set_offset(4096);
  r.set_wait_event(std::string(64, 'e'));
  r.set_completion(v1::COMPLETION_EVENT);
  r.add_done_event_slots(3);
  r.add_done_event_slots(0);
  return r;
}

TEST(WireMatmulRequestTest, FieldsParseAndOperandsGatherWhateverTheSlicesAre) {
  const v1::MatmulRequest request = Request();
  const std::string bytes = request.SerializeAsString();
  v1::MatmulRequest fields = request;
  fields.clear_a();
  fields.clear_b();
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, size_t{1000}, bytes.size()}) {
    auto parsed = WireMatmulRequest::Parse(Cut(bytes, piece));
    ASSERT_TRUE(parsed.ok()) << "slices of " << piece << ": " << parsed.status();
    EXPECT_EQ((*parsed)->fields().SerializeAsString(), fields.SerializeAsString()) << piece;
    EXPECT_EQ(Joined((*parsed)->a()), request.a()) << piece;
    EXPECT_EQ(Joined((*parsed)->b()), request.b()) << piece;
    EXPECT_EQ((*parsed)->a_bytes(), request.a().size());
    EXPECT_EQ((*parsed)->b_bytes(), request.b().size());
  }
}

TEST(WireMatmulRequestTest, FromAByteBufferAndEmptyMeansNoOperands) {
  v1::MatmulRequest request;
  request.mutable_problem()->set_m(5);
  const std::string bytes = request.SerializeAsString();
  std::vector<grpc::Slice> slices = Cut(bytes, 2);
  auto parsed = WireMatmulRequest::Parse(grpc::ByteBuffer(slices.data(), slices.size()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)->fields().problem().m(), 5);
  EXPECT_TRUE((*parsed)->a().empty());
  EXPECT_EQ((*parsed)->b_bytes(), 0u);

  auto empty = WireMatmulRequest::Parse(std::vector<grpc::Slice>{});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_FALSE((*empty)->fields().has_problem());
}

TEST(WireMatmulRequestTest, FieldsInAnyOrderAndTheLastOfARepeatedOperandWins) {
  // b, then a twice, then the problem: protobuf keeps the second a.
  v1::MatmulRequest one, two, three;
  one.set_b("bbbb");
  two.set_a("first");
  three.set_a("second");
  three.mutable_problem()->set_k(9);
  const std::string bytes = one.SerializeAsString() + two.SerializeAsString() + three.SerializeAsString();
  v1::MatmulRequest protobuf;
  ASSERT_TRUE(protobuf.ParseFromString(bytes));
  auto parsed = WireMatmulRequest::Parse(Cut(bytes, 2));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(Joined((*parsed)->a()), protobuf.a());
  EXPECT_EQ(Joined((*parsed)->b()), protobuf.b());
  EXPECT_EQ((*parsed)->fields().problem().k(), 9);
}

TEST(WireMatmulRequestTest, EveryCutShortRequestIsRefusedExactlyWhenProtobufRefusesIt) {
  const std::string bytes = Request().SerializeAsString();
  int refused = 0;
  for (size_t length = 0; length <= bytes.size(); ++length) {
    const std::string prefix = bytes.substr(0, length);
    v1::MatmulRequest protobuf;
    const bool parses = protobuf.ParseFromString(prefix);
    auto parsed = WireMatmulRequest::Parse(Cut(prefix, 5));
    ASSERT_EQ(parsed.ok(), parses) << "prefix of " << length << " bytes: " << parsed.status();
    if (!parsed.ok()) {
      ++refused;
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(parsed.status().message().find("is not a MatmulRequest"), std::string::npos)
          << parsed.status();
    }
  }
  EXPECT_GT(refused, 0);
}

// Bytes from a list of values, for hand-made wire messages.
std::string Bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

TEST(WireMatmulRequestTest, MalformedBytesAreRefusedSayingWhatIsWrong) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* says;
  } cases[] = {
      {"an operand longer than the message", Bytes({0x12, 0x10, 1, 2, 3}), "field 2: 16 bytes announced"},
      {"b's length cut short", Bytes({0x1a, 0x80}), "length cut short"},
      {"an operand length past 2^31", Bytes({0x12, 0x80, 0x80, 0x80, 0x80, 0x08}), "past 2^31"},
      {"field number 0", Bytes({0x00, 0x01}), "no valid field number"},
      {"wire type 7", Bytes({0x27, 0x01}), "wire type 7"},
      {"a group ending at the top", Bytes({0x7c}), "did not start"},
      {"a group never ended", Bytes({0x7b, 0x08, 0x01}), "ends inside"},
      {"a tag cut short", Bytes({0x08, 0x01, 0x80}), "tag is cut short"},
      {"a nested message that does not parse", Bytes({0x0a, 0x02, 0x08, 0x80}), "do not parse"},
      {"a region id that is not UTF-8", Bytes({0x42, 0x03, 0x0a, 0x01, 0xff}), "do not parse"},
  };
  for (const Case& c : cases) {
    v1::MatmulRequest protobuf;
    EXPECT_FALSE(protobuf.ParseFromString(c.bytes)) << c.what << ": protobuf parses it";
    auto parsed = WireMatmulRequest::Parse(Cut(c.bytes, 1));
    ASSERT_FALSE(parsed.ok()) << c.what;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(parsed.status().message().find(c.says), std::string::npos)
        << c.what << ": " << parsed.status();
  }
}

TEST(WireMatmulRequestTest, UnknownFieldsAndGroupsAreSkippedAsProtobufSkipsThem) {
  v1::MatmulRequest request;
  request.mutable_problem()->set_n(4);
  request.set_a("aaaa");
  // Field 20 as a group holding a varint and a nested group; field 21 fixed32;
  // field 22 fixed64; field 2 (a) as a varint, which protobuf keeps as unknown.
  const std::string unknown = Bytes({0xa3, 0x01, 0x08, 0x05, 0x0b, 0x0c, 0xa4, 0x01,  //
                                     0xad, 0x01, 1, 2, 3, 4,                         //
                                     0xb1, 0x01, 1, 2, 3, 4, 5, 6, 7, 8,             //
                                     0x10, 0x07});
  const std::string bytes = request.SerializeAsString() + unknown;
  v1::MatmulRequest protobuf;
  ASSERT_TRUE(protobuf.ParseFromString(bytes));
  auto parsed = WireMatmulRequest::Parse(Cut(bytes, 3));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)->fields().problem().n(), 4);
  EXPECT_EQ(Joined((*parsed)->a()), "aaaa");
}

// --- the client's side: its request bytes and its reading of the reply ---

// The wire bytes of a ByteBuffer, joined.
std::string Joined(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(ClientWireTest, RequestBytesAreTheRequestWithEveryFieldAndNoOperandCopied) {
  v1::MatmulRequest request = Request();
  request.mutable_a_ref()->set_tensor("t-1");
  request.mutable_b_ref()->set_region("r-2");
  // Every field of MatmulRequest is set: a field added to the message and not
  // carried by MatmulRequestBytes fails the round trip below.
  const google::protobuf::Descriptor* d = v1::MatmulRequest::descriptor();
  std::vector<const google::protobuf::FieldDescriptor*> set;
  request.GetReflection()->ListFields(request, &set);
  ASSERT_EQ(set.size(), static_cast<size_t>(d->field_count())) << "set every field of MatmulRequest here";

  std::string bytes;
  {
    client::LentBytes lent;
    grpc::ByteBuffer buffer = client::MatmulRequestBytes(request, &lent);
    bytes = Joined(buffer);
  }
  v1::MatmulRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.SerializeAsString(), request.SerializeAsString());

  v1::MatmulRequest empty;
  client::LentBytes lent;
  EXPECT_EQ(Joined(client::MatmulRequestBytes(empty, &lent)), "");
}

TEST(ClientWireTest, AReplyInManySlicesParsesWithCGathered) {
  v1::MatmulResponse reply;
  reply.set_c(Pattern(100000, 5));
  reply.set_candidate("cpu_blocked");
  reply.set_device_seconds(0.25);
  reply.set_bucket("f32 m:1 n:64-127 k:8");
  std::vector<grpc::Slice> slices = Cut(reply.SerializeAsString(), 777);
  v1::MatmulResponse parsed;
  parsed.set_c("left over from an earlier call");
  const grpc::Status s = client::ParseMatmulReply(grpc::ByteBuffer(slices.data(), slices.size()), &parsed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(parsed.SerializeAsString(), reply.SerializeAsString());

  slices = Cut(Bytes({0x0a, 0x05, 1}), 1);  // C announced longer than the reply
  const grpc::Status bad = client::ParseMatmulReply(grpc::ByteBuffer(slices.data(), slices.size()), &parsed);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(bad.error_message().find("not a MatmulResponse"), std::string::npos) << bad.error_message();
}

// Caller memory with `guard` bytes of 0x5a on each side of `bytes`.
struct Guarded {
  explicit Guarded(size_t bytes, size_t guard = 64) : guard(guard), memory(bytes + 2 * guard, '\x5a') {}
  char* data() { return memory.data() + guard; }
  size_t bytes() const { return memory.size() - 2 * guard; }
  std::string inside() const { return memory.substr(guard, bytes()); }
  bool guards_intact() const {
    const std::string pad(guard, '\x5a');
    return memory.substr(0, guard) == pad && memory.substr(memory.size() - guard) == pad;
  }
  size_t guard;
  std::string memory;
};

TEST(ClientWireTest, AReplyParsedIntoCallerMemoryWritesExactlyCThereAndTheOtherFieldsToTheResponse) {
  v1::MatmulResponse reply;
  reply.set_c(Pattern(100000, 5));
  reply.set_candidate("cpu_blocked");
  reply.set_device_seconds(0.25);
  reply.set_bucket("f32 m:1 n:64-127 k:8");
  const std::vector<grpc::Slice> slices = Cut(reply.SerializeAsString(), 777);
  Guarded c(reply.c().size());
  v1::MatmulResponse parsed;
  parsed.set_c("left over from an earlier call");
  const grpc::Status s = client::ParseMatmulReplyInto(
      grpc::ByteBuffer(slices.data(), slices.size()), c.data(), c.bytes(), &parsed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(c.inside(), reply.c());
  EXPECT_TRUE(c.guards_intact());
  EXPECT_EQ(parsed.c(), "");
  v1::MatmulResponse others = reply;
  others.clear_c();
  EXPECT_EQ(parsed.SerializeAsString(), others.SerializeAsString());
}

TEST(ClientWireTest, AReplyWhoseCIsNotTheCallersSizeIsRefusedWithTheBufferUntouched) {
  v1::MatmulResponse reply;
  reply.set_c(Pattern(4096, 9));
  const std::vector<grpc::Slice> slices = Cut(reply.SerializeAsString(), 1000);
  for (const size_t bytes : {size_t{4095}, size_t{4097}, size_t{0}}) {
    Guarded c(bytes);
    v1::MatmulResponse parsed;
    const grpc::Status s = client::ParseMatmulReplyInto(
        grpc::ByteBuffer(slices.data(), slices.size()), c.data(), c.bytes(), &parsed);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << bytes;
    EXPECT_NE(s.error_message().find("C is 4096 bytes; the caller's buffer " + std::to_string(bytes)),
              std::string::npos)
        << s.error_message();
    EXPECT_EQ(c.memory, std::string(bytes + 2 * c.guard, '\x5a')) << "written although refused";
  }
}

// --- through a daemon on the CPU backend ---

DaemonOptions CpuDaemon() {
  DaemonOptions options;
  options.listen = "127.0.0.1:0";
  options.store_path = ":memory:";
  options.backend = BackendKind::kCpu;
  options.shutdown_grace_seconds = 5;
  options.arbiter.tuning = TuningPolicy::kOff;
  return options;
}

TEST(WireMatmulTest, OperandsThatArriveInManySlicesGiveTheReferencesC) {
  DaemonOptions options = CpuDaemon();
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  client::ClientOptions client_options;
  client_options.server = "127.0.0.1:" + std::to_string((*daemon)->port());
  client::ArbiterClient client(client_options);
  // 1 MiB each of A and B: far more than one HTTP/2 frame, so each arrives in many slices.
  const Problem p{DType::kF32, 8, 16, 32768};
  std::string a(p.a_bytes(), '\0'), b(p.b_bytes(), '\0');
  FillRandom(p.dtype, a.data(), p.m * p.k, 11);
  FillRandom(p.dtype, b.data(), p.k * p.n, 12);
  v1::MatmulRequest request;
  request.mutable_problem()->set_dtype(v1::DTYPE_F32);
  request.mutable_problem()->set_m(p.m);
  request.mutable_problem()->set_n(p.n);
  request.mutable_problem()->set_k(p.k);
  request.set_a(a);
  request.set_b(b);
  v1::MatmulResponse response;
  const grpc::Status status = client.Matmul(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.c().size(), p.c_bytes());
  const client::CheckResult check =
      client::CheckMatmul(request.problem(), client::Operands{a, b}, response.c(),
                          client::DefaultBudget(v1::DTYPE_F32), client::CheckOptions{});
  EXPECT_TRUE(check.passed()) << check.first_failure;
}

v1::MatmulRequest F32Request(const Problem& p, const std::string& a, const std::string& b) {
  v1::MatmulRequest request;
  request.mutable_problem()->set_dtype(v1::DTYPE_F32);
  request.mutable_problem()->set_m(p.m);
  request.mutable_problem()->set_n(p.n);
  request.mutable_problem()->set_k(p.k);
  request.set_a(a);
  request.set_b(b);
  return request;
}

TEST(WireMatmulTest, MatmulIntoWritesTheReferencesCIntoCallerMemoryAtARaggedShape) {
  auto daemon = Daemon::Create(CpuDaemon());
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  client::ClientOptions client_options;
  client_options.server = "127.0.0.1:" + std::to_string((*daemon)->port());
  client::ArbiterClient client(client_options);
  const Problem p{DType::kF32, 37, 129, 65};  // ragged, M != N
  std::string a(p.a_bytes(), '\0'), b(p.b_bytes(), '\0');
  FillRandom(p.dtype, a.data(), p.m * p.k, 21);
  FillRandom(p.dtype, b.data(), p.k * p.n, 22);
  const v1::MatmulRequest request = F32Request(p, a, b);
  // Poisoned: an element the call does not write stays NaN and fails the check.
  Guarded c(p.c_bytes());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i < p.c_bytes() / sizeof(float); ++i) std::memcpy(c.data() + i * sizeof(float), &nan, sizeof(float));
  v1::MatmulResponse response;
  const grpc::Status status = client.MatmulInto(request, c.data(), c.bytes(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(c.guards_intact());
  EXPECT_EQ(response.c(), "");
  EXPECT_FALSE(response.candidate().empty());
  const client::CheckResult check =
      client::CheckMatmul(request.problem(), client::Operands{a, b}, c.inside(),
                          client::DefaultBudget(v1::DTYPE_F32), client::CheckOptions{});
  EXPECT_TRUE(check.passed()) << check.first_failure;
  // The same bytes as the C Matmul returns in the response.
  v1::MatmulResponse with_c;
  ASSERT_TRUE(client.Matmul(request, &with_c).ok());
  EXPECT_EQ(with_c.c(), c.inside());
}

TEST(WireMatmulTest, MatmulIntoAWrongSizeNoBufferOrACRegionIsRefusedBeforeAnythingIsSent) {
  // No daemon at this address: a call that sent anything would be UNAVAILABLE.
  client::ClientOptions client_options;
  client_options.server = "unix:/nonexistent/arbiter-wire-test.sock";
  client_options.deadline_seconds = 5;
  client::ArbiterClient client(client_options);
  const Problem p{DType::kF32, 3, 5, 7};
  v1::MatmulRequest request = F32Request(p, std::string(p.a_bytes(), '\0'), std::string(p.b_bytes(), '\0'));
  std::vector<char> c(p.c_bytes() + 4, 'x');
  v1::MatmulResponse response;

  grpc::Status s = client.MatmulInto(request, c.data(), p.c_bytes() + 4, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("c is 64 bytes; expected 60 (m*n*size = 3*5*4)"), std::string::npos)
      << s.error_message();
  s = client.MatmulInto(request, c.data(), p.c_bytes() - 4, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(c, std::vector<char>(p.c_bytes() + 4, 'x'));

  s = client.MatmulInto(request, nullptr, p.c_bytes(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("c is null"), std::string::npos) << s.error_message();

  request.mutable_c_ref()->set_region("r-1");
  s = client.MatmulInto(request, c.data(), p.c_bytes(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("c_ref"), std::string::npos) << s.error_message();

  // Right-sized: it is sent, and there is no daemon to answer.
  request.clear_c_ref();
  s = client.MatmulInto(request, c.data(), p.c_bytes(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST(WireMatmulTest, MatmulIntoTakesARequestAndAReplyNearTheMessageLimit) {
  // Both near a 9 MiB limit: a request of A and B 4.5 MB each (M = N = 1,
  // K = 1179000), then C of 1500 x 1500 f32 (9,000,000 bytes).
  DaemonOptions options = CpuDaemon();
  options.max_message_bytes = 9 << 20;
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  client::ClientOptions client_options;
  client_options.server = "127.0.0.1:" + std::to_string((*daemon)->port());
  client_options.max_message_bytes = 9 << 20;
  client::ArbiterClient client(client_options);

  const Problem wide{DType::kF32, 1, 1, 1179000};
  std::string a(wide.a_bytes(), '\0'), b(wide.b_bytes(), '\0');
  FillRandom(wide.dtype, a.data(), wide.m * wide.k, 31);
  FillRandom(wide.dtype, b.data(), wide.k * wide.n, 32);
  float dot = std::numeric_limits<float>::quiet_NaN();
  v1::MatmulResponse response;
  grpc::Status s = client.MatmulInto(F32Request(wide, a, b), &dot, sizeof(dot), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(std::isfinite(dot));

  // K = 1: C[i][j] = A[i] * B[j], exactly.
  const Problem outer{DType::kF32, 1500, 1500, 1};
  std::vector<float> av(1500), bv(1500);
  for (int i = 0; i < 1500; ++i) {
    av[i] = static_cast<float>(i % 17) - 8.0f;
    bv[i] = static_cast<float>(i % 13) * 0.5f - 3.0f;
  }
  const v1::MatmulRequest request =
      F32Request(outer, std::string(reinterpret_cast<const char*>(av.data()), outer.a_bytes()),
                 std::string(reinterpret_cast<const char*>(bv.data()), outer.b_bytes()));
  std::vector<float> c(1500 * 1500, std::numeric_limits<float>::quiet_NaN());
  s = client.MatmulInto(request, c.data(), c.size() * sizeof(float), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  int64_t wrong = 0;
  for (int i = 0; i < 1500; ++i) {
    for (int j = 0; j < 1500; ++j) wrong += c[i * 1500 + j] != av[i] * bv[j];
  }
  EXPECT_EQ(wrong, 0);

  // One row more and the reply would pass the limit: refused, C untouched.
  const Problem over{DType::kF32, 1573, 1500, 1};
  std::vector<float> ao(1573, 1.0f);
  std::vector<float> co(1573 * 1500, -1.0f);
  s = client.MatmulInto(
      F32Request(over, std::string(reinterpret_cast<const char*>(ao.data()), over.a_bytes()),
                 std::string(reinterpret_cast<const char*>(bv.data()), over.b_bytes())),
      co.data(), co.size() * sizeof(float), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(co, std::vector<float>(1573 * 1500, -1.0f));
}

// Raw bytes to the wire's Matmul, as a client with no protobuf would send them.
grpc::Status RawMatmul(int port, const std::string& bytes) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::Slice slice(bytes);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer reply;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&context, "/arbiter.v1.Dispatch/Matmul", request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&reply, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  return status;
}

TEST(WireMatmulTest, RawBytesThatAreNoRequestOrTooShortOrTooLargeAreRefusedWithTheirStatus) {
  DaemonOptions options = CpuDaemon();
  options.max_message_bytes = 1 << 20;
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int port = (*daemon)->port();

  // Malformed: an operand announced longer than the message.
  grpc::Status s = RawMatmul(port, Bytes({0x12, 0x10, 1, 2, 3}));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("is not a MatmulRequest"), std::string::npos) << s.error_message();

  // Well formed but short: A has fewer bytes than the problem needs.
  v1::MatmulRequest request;
  request.mutable_problem()->set_dtype(v1::DTYPE_F32);
  request.mutable_problem()->set_m(4);
  request.mutable_problem()->set_n(4);
  request.mutable_problem()->set_k(4);
  request.set_a(std::string(60, '\0'));
  request.set_b(std::string(64, '\0'));
  s = RawMatmul(port, request.SerializeAsString());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("a: expected 64 bytes"), std::string::npos) << s.error_message();

  // Larger than --max-message-bytes: gRPC refuses it before the handler.
  request.set_a(std::string(2 << 20, '\0'));
  s = RawMatmul(port, request.SerializeAsString());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();

  // Nothing ran.
  EXPECT_EQ((*daemon)->arbiter().measurements(), 0);
}

}  // namespace
}  // namespace arbiter::server
