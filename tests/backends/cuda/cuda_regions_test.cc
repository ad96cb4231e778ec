// Zero-copy GPU operands end to end: arbiterd --backend cuda on a Unix socket,
// and client *processes* (arbiterctl, cuda_region_peer) that allocate on the
// daemon's GPU, share it by either export path - CUDA VMM (cuMemCreate, a POSIX
// fd passed over the fd socket) and legacy IPC (cudaIpcGetMemHandle) - and run
// Matmuls whose C is written in place, checked against the reference on
// poisoned output. Host memory too: a sealed memfd the daemon page-locks,
// copying A and B from it and C back into it. Skips (saying so) without a GPU or without the binaries
// beside this one (build dir bin/, or the GPU bundle).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cuda/cuda_backend.h"
#include "client/arbiter_client.h"

extern char** environ;

namespace arbiter::cuda {
namespace {

namespace fs = std::filesystem;

fs::path SelfDir() { return fs::read_symlink("/proc/self/exe").parent_path(); }

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A child process with stdout (and stderr) to `log`, stdin from a pipe we hold.
class Child {
 public:
  Child(const std::vector<std::string>& args, const fs::path& log) : log_(log) {
    int in[2];
    if (pipe(in) != 0) return;
    std::vector<char*> argv;
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_addclose(&actions, in[1]);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    stdin_ = in[1];
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stdin_ >= 0) close(stdin_);
  }
  pid_t pid() const { return pid_; }
  // The exit code; 128 + signal when killed; -1 when it never started.
  int Wait() {
    if (pid_ <= 0) return -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  int Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
    return Wait();
  }
  // The first line it printed, polled (bounded) while it runs.
  std::string FirstLine(double timeout_seconds) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1e3));
    while (std::chrono::steady_clock::now() < until) {
      const std::string text = ReadFile(log_);
      if (const size_t nl = text.find('\n'); nl != std::string::npos) return text.substr(0, nl);
      if (pid_ <= 0 || waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return "";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a file
    }
    return "";
  }
  std::string Log() const { return ReadFile(log_); }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  int stdin_ = -1;
};

class CudaRegionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaBackend::VisibleDevices() == 0) {
      GTEST_SKIP() << "no CUDA device visible: GPU test skipped, not passed";
    }
    for (const char* tool : {"arbiterd", "arbiterctl", "cuda_region_peer"}) {
      if (!fs::exists(SelfDir() / tool)) GTEST_SKIP() << tool << " not found next to this test";
    }
    char dir_template[] = "/tmp/arbiter-cuda-regions-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    server_ = "unix:" + (dir_ / "d.sock").string();
    daemon_ = std::make_unique<Child>(
        std::vector<std::string>{(SelfDir() / "arbiterd").string(), "--backend=cuda",
                                 "--listen=" + server_, "--tuning=sync",
                                 "--store=" + (dir_ / "verdicts.db").string(),
                                 "--port_file=" + (dir_ / "port").string()},
        dir_ / "arbiterd.log");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (ReadFile(dir_ / "port").empty() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a file
    }
    ASSERT_FALSE(ReadFile(dir_ / "port").empty()) << "arbiterd did not start:\n" << daemon_->Log();
    client::ClientOptions options;
    options.server = server_;
    options.deadline_seconds = 60;
    admin_ = std::make_unique<client::ArbiterClient>(options);
    ASSERT_TRUE(admin_->WaitUntilServing(60).ok()) << daemon_->Log();
  }
  void TearDown() override {
    if (daemon_ != nullptr) {
      EXPECT_EQ(daemon_->Signal(SIGTERM), 0) << daemon_->Log();
    }
  }

  std::unique_ptr<Child> Ctl(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> all = {(SelfDir() / "arbiterctl").string(), "--server", server_,
                                    "--timeout", "300"};
    all.insert(all.end(), args.begin(), args.end());
    return std::make_unique<Child>(all, dir_ / log);
  }
  std::unique_ptr<Child> Peer(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> all = {(SelfDir() / "cuda_region_peer").string(), server_};
    all.insert(all.end(), args.begin(), args.end());
    return std::make_unique<Child>(all, dir_ / log);
  }
  bool Registered(const std::string& id) {
    v1::ListRegionsResponse all;
    EXPECT_TRUE(admin_->ListAllRegions(&all).ok());
    for (const v1::Region& r : all.regions()) {
      if (r.id() == id) return true;
    }
    return false;
  }

  fs::path dir_;
  std::string server_;
  std::unique_ptr<Child> daemon_;
  std::unique_ptr<client::ArbiterClient> admin_;
};

TEST_F(CudaRegionsTest, EveryRegionKindRunsMatmulsFromThreeProcessesAtOnce) {
  v1::ServerInfoResponse info;
  ASSERT_TRUE(admin_->ServerInfo(&info).ok());
  ASSERT_EQ(info.region_kinds_size(), 3) << "VMM, legacy IPC and host memfd";
  EXPECT_NE(info.region_kinds(0), v1::REGION_KIND_HOST_MEMFD)
      << "device memory is offered first: a client taking the first kind pays no copies";
  // Three client processes at once, one per kind; ragged shapes; every element checked.
  auto vmm = Ctl({"matmul", "--m", "777", "--n", "333", "--k", "2049", "--dtype", "f16",
                  "--samples", "0", "--operands", "device", "--region-kind", "vmm"}, "vmm.log");
  auto ipc = Ctl({"matmul", "--m", "129", "--n", "1000", "--k", "515", "--dtype", "bf16",
                  "--samples", "0", "--operands", "device", "--region-kind", "ipc"}, "ipc.log");
  auto memfd = Ctl({"matmul", "--m", "513", "--n", "1001", "--k", "777", "--dtype", "f16",
                    "--samples", "0", "--operands", "device", "--region-kind", "memfd"},
                   "memfd.log");
  EXPECT_EQ(vmm->Wait(), 0) << vmm->Log() << daemon_->Log();
  EXPECT_EQ(ipc->Wait(), 0) << ipc->Log() << daemon_->Log();
  EXPECT_EQ(memfd->Wait(), 0) << memfd->Log() << daemon_->Log();
  EXPECT_NE(memfd->Log().find("region (memfd)"), std::string::npos) << memfd->Log();
  std::printf("REGIONS vmm:\n%s\nREGIONS ipc:\n%s\nREGIONS memfd:\n%s\n", vmm->Log().c_str(),
              ipc->Log().c_str(), memfd->Log().c_str());
  v1::ListRegionsResponse all;
  ASSERT_TRUE(admin_->ListAllRegions(&all).ok());
  EXPECT_EQ(all.regions_size(), 0) << "arbiterctl unregisters what it registered";
}

TEST_F(CudaRegionsTest, VocabularyProjectionsRunEndToEnd) {
  for (const char* n : {"128256", "152064", "256000"}) {
    auto device = Ctl({"matmul", "--m", "16", "--n", n, "--k", "1024", "--dtype", "bf16",
                       "--samples", "256", "--operands", "device"},
                      std::string("vocab-") + n + ".log");
    EXPECT_EQ(device->Wait(), 0) << n << ":\n" << device->Log() << daemon_->Log();
    std::printf("REGIONS vocab N=%s:\n%s\n", n, device->Log().c_str());
  }
  auto inline_bytes = Ctl({"matmul", "--m", "4", "--n", "152064", "--k", "512", "--dtype", "bf16",
                           "--operands", "inline"}, "vocab-inline.log");
  EXPECT_EQ(inline_bytes->Wait(), 0) << inline_bytes->Log() << daemon_->Log();
}

TEST_F(CudaRegionsTest, BadOffsetsAreRefusedBeforeLaunchForEveryKind) {
  for (const char* kind : {"vmm", "ipc", "memfd"}) {
    auto peer = Peer({"oob", kind}, std::string("oob-") + kind + ".log");
    EXPECT_EQ(peer->Wait(), 0) << kind << ":\n" << peer->Log() << daemon_->Log();
  }
}

TEST_F(CudaRegionsTest, CompletionEventsSignalCAndASlotIsNotReusedBeforeItsAck) {
  for (const char* kind : {"vmm", "ipc"}) {
    auto peer = Peer({"event", kind}, std::string("event-") + kind + ".log");
    EXPECT_EQ(peer->Wait(), 0) << kind << ":\n" << peer->Log() << daemon_->Log();
    std::printf("REGIONS event %s:\n%s\n", kind, peer->Log().c_str());
  }
  auto ctl = Ctl({"matmul", "--m", "77", "--n", "3000", "--k", "130", "--dtype", "f16",
                  "--samples", "0", "--operands", "device", "--completion", "event"},
                 "ctl-event.log");
  EXPECT_EQ(ctl->Wait(), 0) << ctl->Log() << daemon_->Log();
  EXPECT_NE(ctl->Log().find("event (slot"), std::string::npos) << ctl->Log();
  // C in host memory is copied back before the reply: no event to give, refused saying so.
  auto host = Ctl({"matmul", "--m", "64", "--n", "64", "--k", "64", "--dtype", "f16",
                   "--operands", "device", "--region-kind", "memfd", "--completion", "event"},
                  "ctl-event-memfd.log");
  EXPECT_NE(host->Wait(), 0) << host->Log();
  EXPECT_NE(host->Log().find("host memory"), std::string::npos) << host->Log();
}

TEST_F(CudaRegionsTest, AKilledClientsRegionsAreReleasedAndTheDaemonKeepsServing) {
  for (const char* kind : {"vmm", "ipc", "memfd"}) {
    auto holder = Peer({"hold", kind, std::to_string(64 << 20)}, std::string("hold-") + kind + ".log");
    const std::string id = holder->FirstLine(120);
    ASSERT_FALSE(id.empty() || id.rfind("FAIL", 0) == 0) << holder->Log() << daemon_->Log();
    ASSERT_TRUE(Registered(id));
    holder->Signal(SIGKILL);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (Registered(id) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the daemon's listing
    }
    EXPECT_FALSE(Registered(id)) << kind << ": a killed client's region was kept\n" << daemon_->Log();
  }
  auto after = Ctl({"matmul", "--m", "100", "--n", "200", "--k", "300", "--dtype", "f16",
                    "--operands", "device"}, "after.log");
  EXPECT_EQ(after->Wait(), 0) << after->Log() << daemon_->Log();
  client::HealthStatus health;
  ASSERT_TRUE(admin_->Health("", &health).ok());
  EXPECT_EQ(health, client::HealthStatus::kServing);
}

}  // namespace
}  // namespace arbiter::cuda
