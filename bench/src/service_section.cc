#include "bench/src/service_section.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/arbiter_client.h"
#include "engine/measurer.h"

namespace arbiter::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// An arbiterd this bench started; stopped (SIGTERM, then waited for) when it goes.
class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const ServiceOptions& o,
                                                       const std::string& listen,
                                                       const std::string& port_file,
                                                       const std::string& log) {
    std::vector<std::string> args = {o.arbiterd, "--listen=" + listen, "--backend=" + o.backend,
                                     "--store=:memory:", "--tuning=sync", "--log_level=warn"};
    if (!port_file.empty()) args.push_back("--port_file=" + port_file);
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
  ~Daemon() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  bool Running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  explicit Daemon(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

// The port arbiterd wrote once serving; polls the file (the daemon's only signal) for 30 s.
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

client::ClientOptions Options(const std::string& server) {
  client::ClientOptions o;
  o.server = server;
  return o;
}

v1::DType WireDType(DType d) { return static_cast<v1::DType>(static_cast<int>(d)); }

// Latencies (seconds) of every call `clients` threads made in `seconds`, each
// with its own client (channel), calling `rpc` ("select" or "health") back to back.
absl::StatusOr<std::vector<double>> Load(const std::string& server, const std::string& rpc,
                                         const Problem& p, int clients, double seconds,
                                         double* elapsed) {
  std::vector<std::vector<double>> per(clients);
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<client::ArbiterClient>> stubs;
  for (int i = 0; i < clients; ++i) {
    stubs.push_back(std::make_unique<client::ArbiterClient>(Options(server)));
  }
  v1::SelectRequest req;
  req.mutable_problem()->set_dtype(WireDType(p.dtype));
  req.mutable_problem()->set_m(p.m);
  req.mutable_problem()->set_n(p.n);
  req.mutable_problem()->set_k(p.k);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      while (!stop.load(std::memory_order_relaxed)) {
        const Clock::time_point c0 = Clock::now();
        grpc::Status s;
        if (rpc == "select") {
          v1::SelectResponse resp;
          s = stubs[i]->Select(req, &resp);
        } else {
          client::HealthStatus h;
          s = stubs[i]->Health("", &h);
        }
        per[i].push_back(Since(c0));
        if (!s.ok()) errors.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the load's duration
  stop = true;
  for (auto& t : threads) t.join();
  *elapsed = Since(t0);
  if (errors.load() > 0) {
    return absl::UnavailableError(absl::StrCat(rpc, " on ", server, ": ", errors.load(), " calls failed"));
  }
  std::vector<double> all;
  for (auto& v : per) all.insert(all.end(), v.begin(), v.end());
  return all;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

// The same work as one Matmul, in-process: copy A and B in, run `candidate`, copy C out.
absl::StatusOr<double> InProcess(BenchDevice& dev, const Problem& p, const std::string& candidate,
                                 const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                 int repeats) {
  const RegisteredCandidate* c = dev.registry->Find(candidate);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("in-process: no candidate ", candidate));
  const CandidateMember* member = c->spec.Member(p.dtype);
  if (member == nullptr) return absl::NotFoundError(absl::StrCat(candidate, " has no ", DTypeName(p.dtype)));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> da, dev.backend->Allocate(p.a_bytes()));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> db, dev.backend->Allocate(p.b_bytes()));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> dc, dev.backend->Allocate(p.c_bytes()));
  std::vector<uint8_t> c_host(p.c_bytes());
  std::vector<double> samples;
  for (int i = 0; i <= repeats; ++i) {  // the first is a warm-up
    const Clock::time_point t0 = Clock::now();
    RETURN_IF_ERROR(dev.stream->CopyToDevice(*da, a.data(), a.size()));
    RETURN_IF_ERROR(dev.stream->CopyToDevice(*db, b.data(), b.size()));
    RETURN_IF_ERROR(member->run(GemmArgs{p, da->data(), db->data(), dc->data(), dev.stream.get()}));
    RETURN_IF_ERROR(dev.stream->CopyToHost(c_host.data(), *dc, c_host.size()));
    RETURN_IF_ERROR(dev.stream->Synchronize());
    if (i > 0) samples.push_back(Since(t0));
  }
  return Summarize(samples).median;
}

}  // namespace

absl::StatusOr<ServiceTables> RunService(BenchDevice& dev, const ServiceOptions& o) {
  ServiceTables out;
  out.rpc = Table({"transport", "rpc", "concurrency", "calls", "calls_per_s", "p50_us", "p99_us",
                   "vs_empty_throughput"});
  out.matmul = Table({"transport", "path", "dtype", "n", "candidate", "e2e_s", "inprocess_s",
                      "e2e_vs_inprocess", "daemon_device_s"});
  const Problem select_problem{o.dtype, 256, 256, 256};
  struct Transport {
    std::string name, listen, target;
  };
  const std::string sock = absl::StrCat("unix:", o.scratch, "/arbiterd.sock");
  const std::vector<Transport> transports = {{"tcp", "127.0.0.1:0", ""}, {"unix", sock, sock}};
  for (Transport t : transports) {
    // TCP: port 0, so the daemon picks a free one and writes it to its port file.
    const std::string port_file =
        t.name == "tcp" ? absl::StrCat(o.scratch, "/arbiterd-tcp.port") : "";
    if (!port_file.empty()) std::remove(port_file.c_str());
    ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon,
                     Daemon::Start(o, t.listen, port_file,
                                   absl::StrCat(o.scratch, "/arbiterd-", t.name, ".log")));
    if (!port_file.empty()) {
      ASSIGN_OR_RETURN(int port, WaitForPort(port_file, *daemon));
      t.target = absl::StrCat("127.0.0.1:", port);
    }
    client::ArbiterClient ctl(Options(t.target));
    if (grpc::Status s = ctl.WaitUntilServing(30); !s.ok() || !daemon->Running()) {
      return absl::UnavailableError(absl::StrCat("arbiterd on ", t.listen, " did not serve: ",
                                                 s.error_message(), " (log in ", o.scratch, ")"));
    }
    // Measure Select's bucket once, so every timed Select is a verdict hit.
    {
      v1::SelectRequest req;
      req.mutable_problem()->set_dtype(WireDType(o.dtype));
      req.mutable_problem()->set_m(select_problem.m);
      req.mutable_problem()->set_n(select_problem.n);
      req.mutable_problem()->set_k(select_problem.k);
      v1::SelectResponse resp;
      if (grpc::Status s = ctl.Select(req, &resp); !s.ok()) {
        return absl::UnavailableError(absl::StrCat("warm-up Select: ", s.error_message()));
      }
    }
    for (int clients : o.concurrency) {
      double empty_rate = 0;
      for (const std::string rpc : {"health", "select"}) {
        double elapsed = 0;
        ASSIGN_OR_RETURN(std::vector<double> lat,
                         Load(t.target, rpc, select_problem, clients, o.seconds_per_point, &elapsed));
        const double rate = lat.size() / elapsed;
        if (rpc == "health") empty_rate = rate;
        out.rpc.Add({t.name, rpc == "health" ? "health (empty)" : "select", absl::StrCat(clients),
                     absl::StrCat(lat.size()), Fixed(rate, 0), Fixed(Quantile(lat, 0.5) * 1e6, 1),
                     Fixed(Quantile(lat, 0.99) * 1e6, 1),
                     rpc == "select" && empty_rate > 0 ? Fixed(rate / empty_rate, 3) : ""});
        if (o.verbose) {
          std::cerr << "service " << t.name << " " << rpc << " x" << clients << ": "
                    << Fixed(rate, 0) << " calls/s\n";
        }
      }
    }
    // Matmul end to end, bytes path, against the same work in-process.
    for (int64_t n : o.matmul_sizes) {
      const Problem p{o.dtype, n, n, n};
      std::vector<uint8_t> a(p.a_bytes()), b(p.b_bytes());
      FillRandom(p.dtype, a.data(), p.m * p.k, 1);
      FillRandom(p.dtype, b.data(), p.k * p.n, 2);
      v1::MatmulRequest req;
      req.mutable_problem()->set_dtype(WireDType(p.dtype));
      req.mutable_problem()->set_m(n);
      req.mutable_problem()->set_n(n);
      req.mutable_problem()->set_k(n);
      req.set_a(a.data(), a.size());
      req.set_b(b.data(), b.size());
      v1::MatmulResponse resp;
      std::vector<double> e2e, device;
      for (int i = 0; i <= o.matmul_repeats; ++i) {  // the first measures the bucket
        const Clock::time_point t0 = Clock::now();
        if (grpc::Status s = ctl.Matmul(req, &resp); !s.ok()) {
          return absl::UnavailableError(absl::StrCat("Matmul ", p.ToString(), ": ", s.error_message()));
        }
        if (i > 0) {
          e2e.push_back(Since(t0));
          device.push_back(resp.device_seconds());
        }
      }
      ASSIGN_OR_RETURN(double local, InProcess(dev, p, resp.candidate(), a, b, o.matmul_repeats));
      const double e = Summarize(e2e).median;
      out.matmul.Add({t.name, "bytes", DTypeName(p.dtype), absl::StrCat(n), resp.candidate(),
                      Sci(e), Sci(local), Fixed(e / local, 3), Sci(Summarize(device).median)});
      if (o.verbose) std::cerr << "service " << t.name << " matmul " << p << ": " << Fixed(e / local, 2) << "x\n";
    }
  }
  return out;
}

}  // namespace arbiter::bench
