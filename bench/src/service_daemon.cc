#include "bench/src/service_daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/src/table.h"

namespace arbiter::bench {

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const std::string& arbiterd,
                                                      const std::string& backend,
                                                      const std::string& listen,
                                                      const std::string& port_file,
                                                      int metrics_port, const std::string& log,
                                                      const std::vector<std::string>& flags) {
  std::vector<std::string> args = {arbiterd, "--listen=" + listen, "--backend=" + backend,
                                   "--store=:memory:", "--tuning=sync", "--log_level=warn",
                                   absl::StrCat("--metrics_listen=127.0.0.1:", metrics_port)};
  if (!port_file.empty()) args.push_back("--port_file=" + port_file);
  args.insert(args.end(), flags.begin(), flags.end());
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    if (f != nullptr) dup2(fileno(stdout), fileno(stderr));
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return std::unique_ptr<Daemon>(new Daemon(pid));
}

Daemon::~Daemon() {
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
}

bool Daemon::Running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }

double Daemon::CpuSeconds() const {
  std::ifstream in(absl::StrCat("/proc/", pid_, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t comm_end = text.rfind(')');  // the name may hold spaces
  if (comm_end == std::string::npos) return 0;
  std::istringstream fields(text.substr(comm_end + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

absl::StatusOr<int> WaitForPort(const std::string& path, const Daemon& daemon) {
  for (int i = 0; i < 300; ++i) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0) return port;
    if (!daemon.Running()) return absl::UnavailableError("arbiterd exited before serving");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("arbiterd wrote no port to ", path, " in 30 s"));
}

absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return absl::UnavailableError("no free loopback port");
  return ntohs(addr.sin_port);
}

absl::StatusOr<StageTotals> ScrapeStages(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string text;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string get = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, get.data(), get.size()) == static_cast<ssize_t>(get.size())) {
      char buf[1 << 16];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (text.empty()) return absl::UnavailableError(absl::StrCat("no answer from 127.0.0.1:", port, "/metrics"));
  StageTotals totals;
  std::istringstream lines(text);
  const std::string family = "arbiter_dispatch_stage_seconds_";
  const std::string replayed = "arbiter_dispatch_launches_total{how=\"replayed\"} ";
  for (std::string line; std::getline(lines, line);) {
    if (double n = 0; line.rfind(replayed, 0) == 0 &&
                      absl::SimpleAtod(line.substr(replayed.size()), &n)) {
      totals["replayed"] = {n, n};  // a counter: its count is its value
      continue;
    }
    if (line.rfind(family, 0) != 0) continue;
    const bool sum = line.compare(family.size(), 4, "sum{") == 0;
    const bool count = line.compare(family.size(), 6, "count{") == 0;
    const size_t at = line.find("stage=\""), end = line.find('"', at + 7), space = line.rfind(' ');
    double value = 0;
    if ((!sum && !count) || at == std::string::npos || end == std::string::npos ||
        !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    auto& t = totals[line.substr(at + 7, end - at - 7)];
    (sum ? t.first : t.second) = value;
  }
  return totals;
}

std::pair<double, double> StageDelta(const StageTotals& before, const StageTotals& after,
                                     const std::string& stage) {
  const auto b = before.find(stage);
  const auto a = after.find(stage);
  if (a == after.end()) return {0, 0};
  return {a->second.first - (b == before.end() ? 0 : b->second.first),
          a->second.second - (b == before.end() ? 0 : b->second.second)};
}

double AppendStageMeans(const StageTotals& before, const StageTotals& after,
                        std::vector<std::string>* row) {
  double sum = 0;
  for (const char* stage : kStages) {
    const auto [seconds, calls] = StageDelta(before, after, stage);
    if (calls <= 0) {
      row->push_back("");
      continue;
    }
    sum += seconds / calls;
    row->push_back(Sci(seconds / calls));
  }
  return sum;
}

std::vector<std::string> WithStageColumns(std::vector<std::string> head,
                                          const std::vector<std::string>& tail) {
  for (const char* stage : kStages) head.push_back(absl::StrCat(stage, "_s"));
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

}  // namespace arbiter::bench
