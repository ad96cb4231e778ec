// Regions and resident tensors end to end, in-process on the CPU backend over a
// Unix socket: host shared memory (a sealed memfd) stands in for GPU memory, so
// the whole protocol - sessions on the fd socket, descriptors passed with
// SCM_RIGHTS, ownership, quotas, bounds checks, C written in place - runs in CI.
// A second process (region_peer) is a second peer with its own credentials.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "client/arbiter_client.h"
#include "client/dtype_codec.h"
#include "client/matmul_check.h"
#include "client/shared_memory.h"
#include "server/daemon.h"
#include "tests/server/metrics_scrape.h"
#include "tests/kernels/registry/planted_candidates.h"

extern char** environ;

namespace arbiter::server {
namespace {

using client::AlignUp;
using client::ArbiterClient;
using client::SharedMemory;

class RegionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "arbiter-regions-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(system(("mkdir -p '" + dir_ + "'").c_str()), 0);
    address_ = "unix:" + dir_ + "/d.sock";
  }

  void Start(DaemonOptions options = {}) {
    options.listen = address_ + ",127.0.0.1:0";
    options.store_path = ":memory:";
    options.backend = BackendKind::kCpu;
    options.shutdown_grace_seconds = grace_seconds_;
    options.arbiter.tuning = TuningPolicy::kSync;
    // Regions are about ownership, not timing: no cache flush per sample (under
    // TSan a flush of 2x the last-level cache took a 1x1x1 race past the client's
    // 30 s deadline on a loaded CI machine).
    options.arbiter.measure.cold_cache = false;
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  std::unique_ptr<ArbiterClient> Client(bool session = true, std::string server = "") {
    client::ClientOptions options;
    options.server = server.empty() ? address_ : server;
    options.deadline_seconds = 30;
    auto c = std::make_unique<ArbiterClient>(options);
    if (session) {
      EXPECT_TRUE(c->OpenSession().ok());
    }
    return c;
  }

  // A sealed memfd of `bytes`, registered by `client`.
  std::unique_ptr<SharedMemory> Shared(size_t bytes) {
    std::unique_ptr<SharedMemory> memory;
    EXPECT_TRUE(SharedMemory::Create(bytes, "test", &memory).ok());
    return memory;
  }

  // Polls the daemon's own listing (bounded) until `id` is gone from it.
  bool RegionGone(ArbiterClient& admin, const std::string& id) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      v1::ListRegionsResponse all;
      if (!admin.ListAllRegions(&all).ok()) return false;
      bool found = false;
      for (const v1::Region& r : all.regions()) found |= r.id() == id;
      if (!found) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::string dir_, address_;
  double grace_seconds_ = 5;
  std::unique_ptr<Daemon> daemon_;
};

v1::MatmulRequest Request(int64_t m, int64_t n, int64_t k) {
  v1::MatmulRequest r;
  r.mutable_problem()->set_dtype(v1::DTYPE_F32);
  r.mutable_problem()->set_m(m);
  r.mutable_problem()->set_n(n);
  r.mutable_problem()->set_k(k);
  return r;
}

void Name(v1::OperandRef* ref, const std::string& region, size_t offset) {
  ref->set_region(region);
  ref->set_offset(static_cast<int64_t>(offset));
}

// A ragged f32 problem in one region: A at 0, B and C at aligned offsets after it.
struct Layout {
  int64_t m = 37, n = 53, k = 19;
  size_t a_at = 0, b_at = AlignUp(37 * 19 * 4), c_at = b_at + AlignUp(19 * 53 * 4);
  size_t bytes = c_at + 37 * 53 * 4;
};

TEST_F(RegionsTest, AMatmulOnRegionsWritesCInPlaceAndMatchesTheReference) {
  Start();
  auto client = Client();
  const Layout l;
  auto memory = Shared(l.bytes);
  v1::MatmulRequest request = Request(l.m, l.n, l.k);
  const client::Operands ops = client::RandomOperands(request.problem(), 7);
  char* base = static_cast<char*>(memory->data());
  std::memcpy(base + l.a_at, ops.a.data(), ops.a.size());
  std::memcpy(base + l.b_at, ops.b.data(), ops.b.size());
  const float nan = std::nanf("");
  for (int64_t i = 0; i < l.m * l.n; ++i) std::memcpy(base + l.c_at + 4 * i, &nan, 4);  // poisoned

  v1::Region region;
  ASSERT_TRUE(client->RegisterFd(memory->fd(), v1::REGION_KIND_HOST_MEMFD,
                                 static_cast<int64_t>(l.bytes), "operands", &region).ok());
  EXPECT_EQ(region.bytes(), static_cast<int64_t>(l.bytes));
  EXPECT_EQ(region.owner().pid(), getpid()) << "the owner's SO_PEERCRED";
  EXPECT_EQ(region.owner().uid(), static_cast<int>(getuid()));
  Name(request.mutable_a_ref(), region.id(), l.a_at);
  Name(request.mutable_b_ref(), region.id(), l.b_at);
  Name(request.mutable_c_ref(), region.id(), l.c_at);
  v1::MatmulResponse response;
  const grpc::Status s = client->Matmul(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(response.c().empty()) << "C went to the region, not the reply";

  client::CheckOptions all;
  all.samples = 0;
  const client::CheckResult check =
      client::CheckMatmul(request.problem(), ops, std::string(base + l.c_at, l.m * l.n * 4),
                          client::DefaultBudget(v1::DTYPE_F32), all);
  EXPECT_TRUE(check.passed()) << check.first_failure;
  EXPECT_EQ(check.checked, l.m * l.n);
}

TEST_F(RegionsTest, AZeroCopyMatmulRecordsItsDeviceStagesAndNoCopies) {
  DaemonOptions options;
  options.metrics_listen = "127.0.0.1:0";
  Start(options);
  auto client = Client();
  const Layout l;
  auto memory = Shared(l.bytes);
  v1::MatmulRequest request = Request(l.m, l.n, l.k);
  const client::Operands ops = client::RandomOperands(request.problem(), 9);
  char* base = static_cast<char*>(memory->data());
  std::memcpy(base + l.a_at, ops.a.data(), ops.a.size());
  std::memcpy(base + l.b_at, ops.b.data(), ops.b.size());
  v1::Region region;
  ASSERT_TRUE(client->RegisterFd(memory->fd(), v1::REGION_KIND_HOST_MEMFD,
                                 static_cast<int64_t>(l.bytes), "operands", &region).ok());
  Name(request.mutable_a_ref(), region.id(), l.a_at);
  Name(request.mutable_b_ref(), region.id(), l.b_at);
  Name(request.mutable_c_ref(), region.id(), l.c_at);
  v1::MatmulResponse response;
  for (int call = 0; call < 2; ++call) {
    const grpc::Status s = client->Matmul(request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // The handler records these before it answers; receive and send come later, from gRPC.
  const std::string scrape = Scrape(daemon_->metrics_port());
  for (const char* stage : {"prepare", "lease", "launch", "kernel"}) {
    EXPECT_EQ(StageCount(scrape, stage), 2) << stage;
  }
  EXPECT_EQ(StageCount(scrape, "h2d"), 0) << "operands in a region are not copied in";
  EXPECT_EQ(StageCount(scrape, "d2h"), 0) << "C in a region is not copied out";

  // The bytes path, for contrast: its operands cross both ways.
  v1::MatmulRequest inline_request = Request(l.m, l.n, l.k);
  inline_request.set_a(ops.a);
  inline_request.set_b(ops.b);
  ASSERT_TRUE(client->Matmul(inline_request, &response).ok());
  const std::string after = Scrape(daemon_->metrics_port());
  EXPECT_EQ(StageCount(after, "h2d"), 1);
  EXPECT_EQ(StageCount(after, "d2h"), 1);
  EXPECT_EQ(StageCount(after, "kernel"), 3);
}

TEST_F(RegionsTest, ATensorUploadedOnceServesAsAnOperandUntilReleased) {
  Start();
  auto client = Client();
  v1::MatmulRequest request = Request(5, 300, 7);
  const client::Operands ops = client::RandomOperands(request.problem(), 3);
  v1::Tensor weight;
  ASSERT_TRUE(client->UploadTensor(ops.b.data(), static_cast<int64_t>(ops.b.size()), "w", &weight).ok());
  EXPECT_EQ(weight.bytes(), static_cast<int64_t>(ops.b.size()));
  v1::ListTensorsResponse mine;
  ASSERT_TRUE(client->ListTensors(&mine).ok());
  ASSERT_EQ(mine.tensors_size(), 1);
  EXPECT_EQ(mine.tensors(0).label(), "w");

  request.set_a(ops.a);
  request.mutable_b_ref()->set_tensor(weight.handle());
  v1::MatmulResponse response;
  ASSERT_TRUE(client->Matmul(request, &response).ok());
  client::CheckOptions all;
  all.samples = 0;
  EXPECT_TRUE(client::CheckMatmul(request.problem(), ops, response.c(),
                                  client::DefaultBudget(v1::DTYPE_F32), all).passed());

  // A tensor is never written: it cannot be C.
  v1::MatmulRequest write = request;
  write.mutable_c_ref()->set_tensor(weight.handle());
  EXPECT_EQ(client->Matmul(write, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  ASSERT_TRUE(client->ReleaseTensor(weight.handle()).ok());
  const grpc::Status gone = client->Matmul(request, &response);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::NOT_FOUND) << gone.error_message();
  EXPECT_EQ(client->ReleaseTensor(weight.handle()).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(RegionsTest, ResidentBytesPastTheLimitAreRefusedAndNothingIsEvicted) {
  DaemonOptions options;
  options.arbiter.tensors.max_resident_bytes = 1000;
  Start(options);
  auto client = Client();
  const std::string bytes(600, '\1');
  v1::Tensor first;
  ASSERT_TRUE(client->UploadTensor(bytes.data(), 600, "", &first).ok());
  const grpc::Status over = client->UploadTensor(bytes.data(), 600, "", nullptr);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("--max-resident-bytes 1000"), std::string::npos)
      << over.error_message();
  v1::ListTensorsResponse all;
  ASSERT_TRUE(client->ListAllTensors(&all).ok());
  ASSERT_EQ(all.tensors_size(), 1) << "the first is still there";
  EXPECT_EQ(all.tensors(0).handle(), first.handle());
}

TEST_F(RegionsTest, AnUploadThatEndsShortOfItsAnnouncedBytesHoldsNothing) {
  Start();
  auto client = Client();
  grpc::ClientContext context;
  context.AddMetadata(client::kSessionMetadata, client->session()->token());
  auto stub = v1::Dispatch::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  v1::UploadTensorResponse response;
  auto writer = stub->UploadTensor(&context, &response);
  v1::UploadTensorRequest message;
  message.set_bytes(100);
  message.set_data(std::string(60, '\0'));
  ASSERT_TRUE(writer->Write(message));
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("announced 100 bytes and ended after 60"), std::string::npos)
      << s.error_message();
  v1::ListTensorsResponse all;
  ASSERT_TRUE(client->ListAllTensors(&all).ok());
  EXPECT_EQ(all.tensors_size(), 0);
}

TEST_F(RegionsTest, EveryBadReferenceIsRefusedBeforeAnyWorkNamingWhatWasExpected) {
  Start();
  auto client = Client();
  const Layout l;
  auto memory = Shared(l.bytes);
  v1::Region region;
  ASSERT_TRUE(client->RegisterFd(memory->fd(), v1::REGION_KIND_HOST_MEMFD,
                                 static_cast<int64_t>(l.bytes), "", &region).ok());
  const v1::MatmulRequest good = [&] {
    v1::MatmulRequest r = Request(l.m, l.n, l.k);
    Name(r.mutable_a_ref(), region.id(), l.a_at);
    Name(r.mutable_b_ref(), region.id(), l.b_at);
    Name(r.mutable_c_ref(), region.id(), l.c_at);
    return r;
  }();
  struct Case {
    const char* what;
    std::function<void(v1::MatmulRequest*)> change;
    grpc::StatusCode code;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"C past the end", [&](v1::MatmulRequest* r) { r->mutable_c_ref()->set_offset(l.c_at + 256); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"c: region \"" + region.id() + "\"", "offset " + std::to_string(l.c_at + 256),
        "expected 0 <= offset <= " + std::to_string(l.bytes - 37 * 53 * 4)}},
      {"negative offset", [&](v1::MatmulRequest* r) { r->mutable_a_ref()->set_offset(-256); },
       grpc::StatusCode::INVALID_ARGUMENT, {"a: region", "offset -256"}},
      {"misaligned", [&](v1::MatmulRequest* r) { r->mutable_b_ref()->set_offset(l.b_at + 4); },
       grpc::StatusCode::INVALID_ARGUMENT, {"b: region", "multiple of 256 bytes"}},
      {"C overlaps A", [&](v1::MatmulRequest* r) { r->mutable_c_ref()->set_offset(0); },
       grpc::StatusCode::INVALID_ARGUMENT, {"overlap a"}},
      {"both bytes and a ref", [&](v1::MatmulRequest* r) { r->set_a(std::string(37 * 19 * 4, '\0')); },
       grpc::StatusCode::INVALID_ARGUMENT, {"a: both inline bytes and a_ref"}},
      {"an unknown region", [&](v1::MatmulRequest* r) { r->mutable_b_ref()->set_region("r0000"); },
       grpc::StatusCode::NOT_FOUND, {"region \"r0000\""}},
      {"a ref naming nothing", [&](v1::MatmulRequest* r) { r->mutable_a_ref()->clear_target(); },
       grpc::StatusCode::INVALID_ARGUMENT, {"a_ref: expected a region id or a tensor handle"}},
  };
  for (const Case& c : cases) {
    v1::MatmulRequest r = good;
    c.change(&r);
    v1::MatmulResponse response;
    const grpc::Status s = client->Matmul(r, &response);
    EXPECT_EQ(s.error_code(), c.code) << c.what << ": " << s.error_message();
    for (const std::string& text : c.says) {
      EXPECT_NE(s.error_message().find(text), std::string::npos)
          << c.what << ": \"" << s.error_message() << "\" does not say \"" << text << "\"";
    }
  }
  EXPECT_EQ(daemon_->arbiter().measurements(), 0) << "refused before anything was measured or run";
  v1::MatmulResponse response;
  EXPECT_TRUE(client->Matmul(good, &response).ok());
}

TEST_F(RegionsTest, RegistrationsThatCannotBeMappedSafelyAreRefused) {
  Start();
  auto client = Client();
  auto memory = Shared(4096);
  // More bytes than the memfd holds.
  grpc::Status s = client->RegisterFd(memory->fd(), v1::REGION_KIND_HOST_MEMFD, 8192, "", nullptr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("the memfd holds 4096"), std::string::npos) << s.error_message();
  // A memfd that could be truncated under a kernel.
  const int unsealed = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  s = client->RegisterFd(unsealed, v1::REGION_KIND_HOST_MEMFD, 4096, "", nullptr);
  close(unsealed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("F_SEAL_SHRINK"), std::string::npos) << s.error_message();
  // A kind this backend cannot map.
  v1::RegisterRegionRequest ipc;
  ipc.set_kind(v1::REGION_KIND_CUDA_IPC);
  ipc.set_bytes(4096);
  ipc.set_cuda_ipc_handle(std::string(64, '\0'));
  s = client->RegisterRegion(ipc, nullptr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_NE(s.error_message().find("REGION_KIND_HOST_MEMFD"), std::string::npos) << s.error_message();
  // A descriptor number never passed.
  v1::RegisterRegionRequest unknown;
  unknown.set_kind(v1::REGION_KIND_HOST_MEMFD);
  unknown.set_bytes(4096);
  unknown.set_fd(99);
  EXPECT_EQ(client->RegisterRegion(unknown, nullptr).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ListRegionsResponse all;
  ASSERT_TRUE(client->ListAllRegions(&all).ok());
  EXPECT_EQ(all.regions_size(), 0);
}

TEST_F(RegionsTest, RegionsNeedASessionAndATokenNamingOne) {
  Start();
  auto without = Client(/*session=*/false);
  v1::RegisterRegionRequest request;
  request.set_kind(v1::REGION_KIND_HOST_MEMFD);
  request.set_bytes(4096);
  request.set_fd(1);
  grpc::Status s = without->RegisterRegion(request, nullptr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find(dir_ + "/d.sock.fd"), std::string::npos)
      << "says where the fd socket is: " << s.error_message();

  grpc::ClientContext context;
  context.AddMetadata(client::kSessionMetadata, "0123456789abcdef0123456789abcdef");
  auto stub = v1::Dispatch::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  v1::RegisterRegionResponse response;
  s = stub->RegisterRegion(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
}

TEST_F(RegionsTest, AnotherSessionCannotUseListOrReleaseARegion) {
  Start();
  auto owner = Client();
  auto other = Client();
  auto memory = Shared(1024);
  v1::Region region;
  ASSERT_TRUE(owner->RegisterFd(memory->fd(), v1::REGION_KIND_HOST_MEMFD, 1024, "", &region).ok());
  v1::MatmulRequest request = Request(1, 1, 1);
  Name(request.mutable_a_ref(), region.id(), 0);
  Name(request.mutable_b_ref(), region.id(), 256);
  Name(request.mutable_c_ref(), region.id(), 512);
  v1::MatmulResponse response;
  EXPECT_EQ(other->Matmul(request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(other->UnregisterRegion(region.id()).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ListRegionsResponse theirs;
  ASSERT_TRUE(other->ListRegions(&theirs).ok());
  EXPECT_EQ(theirs.regions_size(), 0);
  EXPECT_TRUE(owner->Matmul(request, &response).ok()) << "still the owner's";
}

// Runs region_peer with `args`; its stdout through `out` (a pipe's read end) when asked.
pid_t SpawnPeer(const std::vector<std::string>& args, int* out, int* in) {
  int out_pipe[2], in_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(in_pipe) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, in_pipe[1]);
  std::vector<char*> argv = {const_cast<char*>(REGION_PEER)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, REGION_PEER, &actions, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(in_pipe[0]);
  *out = out_pipe[0];
  *in = in_pipe[1];
  return pid;
}

std::string ReadLine(int fd) {
  std::string line;
  char ch;
  while (read(fd, &ch, 1) == 1 && ch != '\n') line += ch;
  return line;
}

TEST_F(RegionsTest, AnotherProcessCannotUseOrReleaseARegion) {
  Start();
  auto owner = Client();
  auto memory = Shared(1024);
  v1::Region region;
  ASSERT_TRUE(owner->RegisterFd(memory->fd(), v1::REGION_KIND_HOST_MEMFD, 1024, "", &region).ok());
  int out = -1, in = -1;
  const pid_t peer = SpawnPeer({address_, "use", region.id()}, &out, &in);
  ASSERT_GT(peer, 0);
  const std::string codes = ReadLine(out);
  int status = 0;
  ASSERT_EQ(waitpid(peer, &status, 0), peer);
  close(out);
  close(in);
  EXPECT_EQ(codes, "5 5") << "NOT_FOUND for the Matmul and the Unregister";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  v1::ListRegionsResponse mine;
  ASSERT_TRUE(owner->ListRegions(&mine).ok());
  EXPECT_EQ(mine.regions_size(), 1) << "still registered";
}

TEST_F(RegionsTest, AKilledClientsRegionsAreReleasedAndTheDaemonKeepsServing) {
  Start();
  auto admin = Client(/*session=*/false);
  int out = -1, in = -1;
  const pid_t peer = SpawnPeer({address_, "hold", "4096"}, &out, &in);
  ASSERT_GT(peer, 0);
  const std::string id = ReadLine(out);
  ASSERT_FALSE(id.empty()) << "the peer registered nothing";
  v1::ListRegionsResponse all;
  ASSERT_TRUE(admin->ListAllRegions(&all).ok());
  ASSERT_EQ(all.regions_size(), 1);
  EXPECT_EQ(all.regions(0).owner().pid(), peer);

  kill(peer, SIGKILL);
  int status = 0;
  waitpid(peer, &status, 0);
  close(out);
  close(in);
  EXPECT_TRUE(RegionGone(*admin, id)) << "a dead process's region was kept";
  v1::MatmulRequest request = Request(2, 3, 4);
  request.set_a(std::string(2 * 4 * 4, '\0'));
  request.set_b(std::string(4 * 3 * 4, '\0'));
  v1::MatmulResponse response;
  EXPECT_TRUE(admin->Matmul(request, &response).ok());
}

TEST_F(RegionsTest, EndingASessionReleasesItsRegionsAndTensors) {
  Start();
  auto admin = Client(/*session=*/false);
  auto client = Client();
  auto memory = Shared(1024);
  v1::Region region;
  ASSERT_TRUE(client->RegisterFd(memory->fd(), v1::REGION_KIND_HOST_MEMFD, 1024, "", &region).ok());
  ASSERT_TRUE(client->UploadTensor("abcd", 4, "", nullptr).ok());
  client.reset();  // closes the session's connection
  EXPECT_TRUE(RegionGone(*admin, region.id()));
  v1::ListTensorsResponse tensors;
  ASSERT_TRUE(admin->ListAllTensors(&tensors).ok());
  EXPECT_EQ(tensors.tensors_size(), 0) << "released with the session, before its regions were";
}

TEST_F(RegionsTest, QuotasOfRegionsAndBytesAreEnforcedPerProcess) {
  DaemonOptions options;
  options.arbiter.regions.max_regions_per_peer = 2;
  options.arbiter.regions.max_bytes_per_peer = 8192;
  Start(options);
  auto first = Client();
  auto second = Client();  // another session of the same process shares the quota
  std::vector<std::unique_ptr<SharedMemory>> memories;
  for (int i = 0; i < 3; ++i) memories.push_back(Shared(4096));
  ASSERT_TRUE(first->RegisterFd(memories[0]->fd(), v1::REGION_KIND_HOST_MEMFD, 1024, "", nullptr).ok());
  ASSERT_TRUE(second->RegisterFd(memories[1]->fd(), v1::REGION_KIND_HOST_MEMFD, 1024, "", nullptr).ok());
  grpc::Status s = first->RegisterFd(memories[2]->fd(), v1::REGION_KIND_HOST_MEMFD, 1024, "", nullptr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("--max-regions-per-peer"), std::string::npos) << s.error_message();

  v1::ListRegionsResponse mine;
  ASSERT_TRUE(second->ListRegions(&mine).ok());
  ASSERT_EQ(mine.regions_size(), 1);
  ASSERT_TRUE(second->UnregisterRegion(mine.regions(0).id()).ok());
  s = first->RegisterFd(memories[2]->fd(), v1::REGION_KIND_HOST_MEMFD, 8000, "", nullptr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("--max-region-bytes-per-peer"), std::string::npos)
      << s.error_message();
  EXPECT_TRUE(first->RegisterFd(memories[2]->fd(), v1::REGION_KIND_HOST_MEMFD, 4096, "", nullptr).ok());
}

TEST_F(RegionsTest, HostMemoryRegionsHaveAQuotaOfTheirOwnWithinTheBytesQuota) {
  DaemonOptions options;
  options.arbiter.regions.max_bytes_per_peer = 1 << 20;
  options.arbiter.regions.max_host_bytes_per_peer = 6000;  // what a GPU daemon would page-lock
  Start(options);
  auto client = Client();
  std::vector<std::unique_ptr<SharedMemory>> memories;
  for (int i = 0; i < 3; ++i) memories.push_back(Shared(4096));
  v1::Region first;
  ASSERT_TRUE(client->RegisterFd(memories[0]->fd(), v1::REGION_KIND_HOST_MEMFD, 4096, "", &first).ok());
  grpc::Status s = client->RegisterFd(memories[1]->fd(), v1::REGION_KIND_HOST_MEMFD, 4096, "", nullptr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("--max-host-region-bytes-per-peer"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("4096 bytes of host-memory regions"), std::string::npos)
      << s.error_message();
  // A refused registration reserves nothing; an unregistered region gives its bytes back.
  ASSERT_TRUE(client->RegisterFd(memories[1]->fd(), v1::REGION_KIND_HOST_MEMFD, 1904, "", nullptr).ok());
  ASSERT_TRUE(client->UnregisterRegion(first.id()).ok());
  EXPECT_TRUE(client->RegisterFd(memories[2]->fd(), v1::REGION_KIND_HOST_MEMFD, 4096, "", nullptr).ok());
}

TEST_F(RegionsTest, ATcpClientsTensorsAreNotAnotherClientsAndListingsShowOwners) {
  Start();
  auto unix_client = Client();
  v1::Tensor tensor;
  ASSERT_TRUE(unix_client->UploadTensor("abcdefgh", 8, "mine", &tensor).ok());
  auto tcp = Client(/*session=*/false, "127.0.0.1:" + std::to_string(daemon_->port()));
  v1::MatmulRequest request = Request(1, 2, 1);
  request.set_a(std::string(4, '\0'));
  request.mutable_b_ref()->set_tensor(tensor.handle());
  v1::MatmulResponse response;
  EXPECT_EQ(tcp->Matmul(request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(tcp->ReleaseTensor(tensor.handle()).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(unix_client->Matmul(request, &response).ok());

  v1::ListTensorsResponse all;
  ASSERT_TRUE(tcp->ListAllTensors(&all).ok());  // admin, on loopback
  ASSERT_EQ(all.tensors_size(), 1);
  EXPECT_EQ(all.tensors(0).owner().pid(), getpid());
  EXPECT_NE(all.tensors(0).owner().address().find("pid " + std::to_string(getpid())), std::string::npos);
}


TEST_F(RegionsTest, ATcpClientsTensorsOutliveItsConnectionAndItsHostUsesAndReleasesThem) {
  Start();
  client::ClientOptions options;
  options.server = "127.0.0.1:" + std::to_string(daemon_->port());
  options.deadline_seconds = 30;
  options.own_connection = true;
  v1::Tensor tensor;
  {
    ArbiterClient first(options);
    ASSERT_TRUE(first.UploadTensor("abcdefgh", 8, "w", &tensor).ok());
  }  // its connection closes
  ArbiterClient second(options);  // another connection of the same host: another port
  v1::ListTensorsResponse mine;
  ASSERT_TRUE(second.ListTensors(&mine).ok());
  ASSERT_EQ(mine.tensors_size(), 1) << "the host's tensor is listed on its new connection";
  EXPECT_EQ(mine.tensors(0).handle(), tensor.handle());
  v1::MatmulRequest request = Request(1, 2, 1);
  request.set_a(std::string(4, '\0'));
  request.mutable_b_ref()->set_tensor(tensor.handle());
  v1::MatmulResponse response;
  EXPECT_TRUE(second.Matmul(request, &response).ok());
  ASSERT_TRUE(second.ReleaseTensor(tensor.handle()).ok());
  v1::ListTensorsResponse all;
  ASSERT_TRUE(second.ListAllTensors(&all).ok());  // admin, on loopback
  EXPECT_EQ(all.tensors_size(), 0) << "released: nothing is left held for the closed connection";
}


// A kernel that runs when the test lets it: planted_gated's `before`.
struct KernelGate {
  absl::Mutex mu;
  bool hold ABSL_GUARDED_BY(mu) = false;     // the next run waits until it is cleared
  bool entered ABSL_GUARDED_BY(mu) = false;  // a run is waiting
  bool Released() const ABSL_SHARED_LOCKS_REQUIRED(mu) { return !hold; }
};

TEST_F(RegionsTest, ShutdownEndsSoonAfterTheGraceWhenAClientStopsReadingItsReply) {
  auto gate = std::make_shared<KernelGate>();
  DaemonOptions options;
  options.extra_candidates.push_back(testing::MakePlantedGatedCandidate([gate] {
    absl::MutexLock lock(&gate->mu);
    if (!gate->hold) return;
    gate->entered = true;
    gate->mu.Await(absl::Condition(gate.get(), &KernelGate::Released));
  }));
  grace_seconds_ = 1;
  // The kernel's default buffer (208 KiB), so the 2 MB reply overfills the socket:
  // with 4 MiB asked for, the little gRPC may write to a stopped client (its
  // flow-control window) fits in the buffer, and nothing is stuck.
  options.unix_socket_buffer_bytes = 0;
  Start(options);
  auto admin = Client(/*session=*/false, "127.0.0.1:" + std::to_string(daemon_->port()));
  v1::ForceRequest force;
  *force.mutable_problem() = Request(724, 724, 1).problem();  // C: 724 * 724 * 4 = 2 MB
  force.set_candidate("planted_gated");
  force.set_reason("the test decides when the kernel runs");
  v1::ForceResponse forced;
  ASSERT_TRUE(admin->Force(force, &forced).ok());
  {
    absl::MutexLock lock(&gate->mu);
    gate->hold = true;
  }
  int out = -1, in = -1;
  const pid_t peer = SpawnPeer({address_, "matmul", "724", "724"}, &out, &in);
  ASSERT_GT(peer, 0);
  {
    absl::MutexLock lock(&gate->mu);
    ASSERT_TRUE(gate->mu.AwaitWithTimeout(absl::Condition(&gate->entered), absl::Seconds(120)))
        << "the peer's Matmul never reached the kernel";
  }
  // The client stops reading; then its 2 MB reply is produced, more than the
  // Unix socket holds.
  kill(peer, SIGSTOP);
  int status = 0;
  ASSERT_EQ(waitpid(peer, &status, WUNTRACED), peer);
  ASSERT_TRUE(WIFSTOPPED(status));
  {
    absl::MutexLock lock(&gate->mu);
    gate->hold = false;
  }
  auto shutdown = std::async(std::launch::async, [this] { return daemon_->Shutdown(); });
  // Bounded by the grace period plus a few seconds; a generous wait here.
  const bool ended = shutdown.wait_for(std::chrono::seconds(120)) == std::future_status::ready;
  kill(peer, SIGCONT);  // it reads (or finds the call cancelled) and exits
  const bool clean = shutdown.get();
  ReadLine(out);
  ASSERT_EQ(waitpid(peer, &status, 0), peer);
  close(out);
  close(in);
  EXPECT_TRUE(ended) << "SIGTERM's shutdown waited on a reply its client never read";
  EXPECT_FALSE(clean) << "the reply was not stuck: the test proved nothing";
}

}  // namespace
}  // namespace arbiter::server
