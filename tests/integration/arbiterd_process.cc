#include "tests/integration/arbiterd_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/arbiter_client.h"

namespace arbiter::testing {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point After(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Between checks of a condition (a file, a child's state); never a wait in place of one.
void PollInterval() { std::this_thread::sleep_for(std::chrono::milliseconds(10)); }

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) return "";
  return buf.data();
}

std::unique_ptr<ArbiterdProcess> ArbiterdProcess::Start(const ArbiterdOptions& options,
                                                        std::string* error) {
  std::unique_ptr<ArbiterdProcess> proc(new ArbiterdProcess());
  proc->dir_ = MakeTempDir("arbiterd-");
  if (proc->dir_.empty()) {
    *error = "cannot create a temporary directory";
    return nullptr;
  }
  const std::string port_file = proc->dir_ + "/port";
  proc->log_path_ = proc->dir_ + "/arbiterd.log";

  std::vector<std::string> args = {options.binary,
                                   "--listen=127.0.0.1:0",
                                   "--store=" + options.store_path,
                                   "--backend=" + options.backend,
                                   "--tuning=" + options.tuning,
                                   "--port-file=" + port_file,
                                   "--log-level=info"};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    *error = "fork failed";
    return nullptr;
  }
  if (pid == 0) {
    const int fd = open(proc->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  proc->pid_ = pid;

  // The port file appears once the server is listening (written atomically).
  const auto deadline = After(options.start_timeout_seconds);
  while (true) {
    std::ifstream in(port_file);
    if (in >> proc->port_ && proc->port_ > 0) break;
    if (proc->Exited()) {
      *error = "arbiterd exited with status " + std::to_string(proc->exit_status_) +
               " before listening; log:\n" + proc->ReadLog();
      return nullptr;
    }
    if (Clock::now() >= deadline) {
      *error = "arbiterd wrote no port file in time; log:\n" + proc->ReadLog();
      return nullptr;
    }
    PollInterval();
  }

  client::ClientOptions client_options;
  client_options.server = proc->address();
  client::ArbiterClient client(client_options);
  const double left =
      std::chrono::duration<double>(deadline - Clock::now()).count();
  grpc::Status serving = client.WaitUntilServing(left > 1 ? left : 1);
  if (!serving.ok()) {
    *error = "arbiterd on " + proc->address() + " never became SERVING: " +
             serving.error_message() + "; log:\n" + proc->ReadLog();
    return nullptr;
  }
  return proc;
}

bool ArbiterdProcess::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return false;
  if (r == pid_) {
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status)
                                     : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1);
  }
  pid_ = -1;
  return true;
}

int ArbiterdProcess::Terminate(double timeout_seconds) {
  if (Exited()) return exit_status_;
  kill(pid_, SIGTERM);
  const auto deadline = After(timeout_seconds);
  while (!Exited()) {
    if (Clock::now() >= deadline) return -1;
    PollInterval();
  }
  return exit_status_;
}

int ArbiterdProcess::WaitExit(double timeout_seconds) {
  const auto deadline = After(timeout_seconds);
  while (!Exited()) {
    if (Clock::now() >= deadline) return -1;
    PollInterval();
  }
  return exit_status_;
}

std::string ArbiterdProcess::ReadLog() const {
  std::ifstream in(log_path_);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

ArbiterdProcess::~ArbiterdProcess() {
  if (Terminate() == -1 && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  // Kept for post-mortem when asked.
  if (std::getenv("ARBITER_KEEP_TEST_DIRS") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace arbiter::testing
