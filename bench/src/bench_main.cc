// arbiter-bench: answers, with ratios measured side by side in one run, whether
// Arbiter's kernels and selection beat calling the vendor library. Writes CSV
// tables, a Markdown results page with the method, and (via bench/plot.py) the
// plots, under --out. See bench/README.md.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/src/bench_device.h"
#include "bench/src/rpc_load.h"
#include "bench/src/sections.h"
#include "bench/src/service_section.h"
#include "bench/src/tuning_section.h"
#include "bench/src/shapes.h"
#include "bench/src/summary.h"
#include "engine/arbiter.h"
#include "engine/verdict_store.h"

ABSL_FLAG(std::string, backend, "auto", "cpu, cuda, or auto (cuda where a GPU is visible)");
ABSL_FLAG(std::string, sections, "kernels,selection,transfer,service,tuning",
          "comma list of: kernels, selection, transfer, service, tuning");
ABSL_FLAG(std::string, grid, "", "kernel grid: full, small or tiny (default full on cuda, small on cpu)");
ABSL_FLAG(std::string, dtype, "", "kernel grid dtype (default bf16 on cuda, f32 on cpu)");
ABSL_FLAG(std::string, shapes, "",
          "selection shape list, \"M N K dtype\" per line (default "
          "../shared/eval/transformer-shapes.txt from the repository root)");
ABSL_FLAG(std::string, out, "", "results folder (default bench/results/<backend>)");
ABSL_FLAG(double, max_gflop, 0, "skip shapes of more GFLOP (0: none skipped)");
ABSL_FLAG(double, kernels_budget_s, 0, "kernels: start no new shape after this many seconds (0: none)");
ABSL_FLAG(double, selection_budget_s, 0, "selection: start no new shape after this many seconds");
ABSL_FLAG(double, transfer_budget_s, 0, "transfer: start no new shape after this many seconds");
ABSL_FLAG(bool, transfer_issue_table, true,
          "transfer: on cuda, also the buckets and shapes of issue 11's table (bf16), first");
ABSL_FLAG(std::string, transfer_shapes, "",
          "transfer: only these served shapes, comma list of MxNxK (e.g. 16x16x32776); a bucket "
          "serving none of them is not measured (default: every shape of the grid)");
ABSL_FLAG(bool, second_run, true, "kernels: measure every shape twice to show the runs agree");
ABSL_FLAG(int, warmup, 1, "untimed interleaved rounds before sampling");
ABSL_FLAG(int, min_samples, 5, "timed samples per candidate at least");
ABSL_FLAG(int, max_samples, 30, "timed samples per candidate at most");
ABSL_FLAG(double, device_budget_s, 0.5,
          "per race: device time of all samples after which candidates with min_samples stop");
ABSL_FLAG(double, wall_budget_s, 2.0,
          "per race: host wall time of the timing phase after which candidates with min_samples "
          "stop");
ABSL_FLAG(double, wall_limit_s, 20, "per race: host wall time of the timing phase, hard limit");
ABSL_FLAG(bool, cold_cache, true, "flush the last-level cache before every sample");
ABSL_FLAG(bool, hold_launches, true,
          "enqueue each sample behind a launch hold (Stream::HoldLaunches); false times as "
          "before 4b4b983, for A/B runs of the method");
ABSL_FLAG(std::string, peak_squares, "",
          "n of the n^3 squares the vendor's peak is probed at (default 4096,8192 on cuda, "
          "256,512 on cpu)");
ABSL_FLAG(int, cpu_threads, 0, "CPU backend threads (0: all)");
ABSL_FLAG(std::string, clocks_file, "", "text recorded as the clocks seen (e.g. nvidia-smi -q -d CLOCK)");
ABSL_FLAG(std::string, arbiterd, "", "service: the arbiterd to start (default: next to arbiter-bench)");
ABSL_FLAG(std::string, concurrency, "1,4,16", "service: clients in flight, comma list");
ABSL_FLAG(double, service_seconds, 1.0,
          "service: seconds of each load of Select or the empty RPC (per transport, concurrency, "
          "round)");
ABSL_FLAG(int, service_rounds, 3,
          "service: rounds of Select against the empty RPC per concurrency, the two back to back "
          "in each, their order alternating");
ABSL_FLAG(std::string, matmul_sizes, "",
          "service: n of the n^3 Matmuls (default 256..8192 on cuda, 128,256,512 on cpu)");
ABSL_FLAG(int, matmul_repeats, 5, "service: Matmul calls per path and size (median)");
ABSL_FLAG(std::string, wire_mib, "",
          "service: request sizes (MiB) of the wire rows, f32 1x1xK Matmuls whose kernel is next "
          "to nothing (default 16,64,256 on cuda, 4,16 on cpu; \",\": none)");
ABSL_FLAG(int64_t, service_staging_min_bytes, 1 << 20,
          "service: the staged rows' client stages Matmuls of at least this many bytes of A, B "
          "and C (the client library's default; sizes below get no staged row)");
ABSL_FLAG(std::string, daemon_flags, "",
          "service: more flags for each arbiterd it starts, comma list (e.g. --launch_graphs=0)");
ABSL_FLAG(std::string, zero_copy, "auto",
          "service: the zero-copy Matmul rows (operands in a region of the daemon's device memory, "
          "on the unix socket) and the host-region rows (in host shared memory the daemon copies "
          "to its device): auto (on the cuda backend), on, off");
ABSL_FLAG(std::string, tuning_shapes, "",
          "tuning: MxNxK:dtype list (default squares 256..8192 bf16 and 4096x28672x4096:f16 on "
          "cuda, 64..512 f32 on cpu)");
ABSL_FLAG(int, tuning_repeats, 2, "tuning: times each bucket is measured (median)");
ABSL_FLAG(std::string, note, "", "recorded in the method (e.g. what else ran on the machine)");
ABSL_FLAG(bool, quiet, false, "no progress lines on stderr");

namespace {

using namespace arbiter;
using namespace arbiter::bench;

[[noreturn]] void Die(const absl::Status& s) {
  std::cerr << "arbiter-bench: " << s << "\n";
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> v) {
  if (!v.ok()) Die(v.status());
  return std::move(*v);
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<int64_t> Int64List(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view s : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t n;
    if (!absl::SimpleAtoi(s, &n) || n <= 0) {
      Die(absl::InvalidArgumentError(absl::StrCat("--", flag, ": expected positive integers, got \"",
                                                  text, "\"")));
    }
    out.push_back(n);
  }
  return out;
}

std::string SelfDir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  return path.substr(0, path.rfind('/'));
}

std::string CpuClocks() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) return line;
  }
  return "not reported";
}

// --sections, checked: section name -> asked for.
std::map<std::string, bool> SectionsFromFlag() {
  std::map<std::string, bool> sections;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sections), ',', absl::SkipEmpty())) {
    if (s != "kernels" && s != "selection" && s != "transfer" && s != "service" &&
        s != "tuning") {
      Die(absl::InvalidArgumentError(absl::StrCat(
          "--sections: expected kernels, selection, transfer, service and/or tuning, got \"", s,
          "\"")));
    }
    sections[std::string(s)] = true;
  }
  return sections;
}

// --shapes, or the public transformer list from the repository root (or a worktree under it).
std::string ShapesPathFromFlag() {
  if (!absl::GetFlag(FLAGS_shapes).empty()) return absl::GetFlag(FLAGS_shapes);
  for (const char* p :
       {"../shared/eval/transformer-shapes.txt", "../../shared/eval/transformer-shapes.txt"}) {
    if (Exists(p)) return p;
  }
  Die(absl::NotFoundError(
      "selection: no --shapes given and ../shared/eval/transformer-shapes.txt not found"));
}

// --tuning_shapes ("MxNxK:dtype,..."), or the backend's default list.
std::vector<Problem> TuningShapesFromFlag(bool gpu) {
  std::string spec = absl::GetFlag(FLAGS_tuning_shapes);
  if (spec.empty()) {
    spec = gpu ? "256x256x256:bf16,1024x1024x1024:bf16,4096x4096x4096:bf16,"
                 "8192x8192x8192:bf16,4096x28672x4096:f16"
               : "64x64x64:f32,128x128x128:f32,256x256x256:f32,512x512x512:f32";
  }
  std::vector<Problem> shapes;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(item, absl::ByAnyChar("x:"));
    Problem p;
    std::optional<DType> dt = parts.size() == 4 ? ParseDType(parts[3]) : std::nullopt;
    if (!dt || !absl::SimpleAtoi(parts[0], &p.m) || !absl::SimpleAtoi(parts[1], &p.n) ||
        !absl::SimpleAtoi(parts[2], &p.k)) {
      Die(absl::InvalidArgumentError(
          absl::StrCat("--tuning_shapes: expected MxNxK:dtype, got \"", item, "\"")));
    }
    p.dtype = *dt;
    shapes.push_back(p);
  }
  return shapes;
}

// What the method table says of this run beyond the device and the options.
struct RunDescription {
  bool gpu = false;
  std::string started;      // UTC, when the run began
  std::string grid;         // the kernel grid and its dtype
  std::string shapes_path;  // the selection/transfer shape list; empty: not read
  std::string shapes_hash;
};

// The method: how every figure was measured, on what, when and at which commit.
Table MethodTable(const BenchDevice& dev, const SectionOptions& options, const Rates& rates,
                  const RunDescription& run) {
  const DeviceInfo& info = dev.backend->info();
  const MeasureOptions& measure = options.measure;
  std::vector<std::string> versions;
  for (const auto& [k, v] : info.versions) versions.push_back(absl::StrCat(k, " ", v));
  std::string clocks = absl::GetFlag(FLAGS_clocks_file).empty()
                           ? (run.gpu ? "not recorded (pass --clocks_file)" : CpuClocks())
                           : ReadText(absl::GetFlag(FLAGS_clocks_file));
  while (!clocks.empty() && clocks.back() == '\n') clocks.pop_back();
  std::replace(clocks.begin(), clocks.end(), '\n', ';');
  if (rates.clock_max_mhz > 0) {
    clocks = absl::StrCat("SM clock seen while timing: ", static_cast<int>(rates.clock_min_mhz),
                          "-", static_cast<int>(rates.clock_max_mhz), " MHz; ", clocks);
  }
  Table method({"key", "value"});
  method.Add({"device", absl::StrCat(info.name, " (", info.backend, ", ", info.arch, ", ",
                                     info.multiprocessors, run.gpu ? " SMs)" : " threads)")});
  method.Add({"versions", absl::StrJoin(versions, "; ")});
  method.Add({"date", run.started});
  method.Add({"commit", ARBITER_BENCH_COMMIT});
  method.Add({"timer", TimerMethod(dev)});
  method.Add({"warmup", absl::StrCat(measure.warmup_runs, " untimed interleaved rounds "
                                     "(after the oracle and determinism runs)")});
  method.Add({"repeats",
              absl::StrCat(measure.min_samples, "..", measure.max_samples,
                           " samples per candidate in interleaved rounds, until IQR/median < ",
                           measure.stable_spread, ", or the race's budgets (device ",
                           measure.device_budget_seconds, " s, wall ",
                           measure.wall_budget_seconds, " s, limit ", measure.wall_limit_seconds,
                           " s) are spent; figures are medians, spread IQR/median")});
  method.Add({"cold_cache", measure.cold_cache
                                ? absl::StrCat("the backend's FlushCache before every sample (",
                                               info.cache_bytes,
                                               " B last-level cache evicted by reading twice "
                                               "as much: clean lines left, none to write back)")
                                : "off (warm cache)"});
  method.Add({"launch_hold", measure.hold_launches
                                 ? "each sample's flush, events and launches enqueued behind a "
                                   "hold released once all are enqueued (no host launch cost "
                                   "in the window)"
                                 : "off (launches enqueued straight onto the running stream)"});
  method.Add({"checked", "every candidate checked by the oracle on NaN-poisoned output, and its "
                         "determinism claim, before timing (the engine's Measurer)"});
  method.Add({"clocks", clocks.substr(0, 600)});
  method.Add({"peak_tflops", absl::StrCat(Fixed(rates.peak_flops / 1e12, 4), " (", dev.vendor,
                                          " at ", rates.peak_shape, ")")});
  method.Add({"copy_bandwidth_gbs", Fixed(rates.copy_bandwidth / 1e9, 1)});
  method.Add({"grid", run.grid});
  method.Add({"shapes", run.shapes_path.empty()
                            ? ""
                            : absl::StrCat(run.shapes_path, " fnv1a64 ", run.shapes_hash)});
  method.Add({"vendor", dev.vendor});
  method.Add({"second_run", options.second_run ? "each kernel shape measured twice" : "off"});
  if (!absl::GetFlag(FLAGS_daemon_flags).empty()) {
    method.Add({"daemon_flags", absl::GetFlag(FLAGS_daemon_flags)});
  }
  if (!absl::GetFlag(FLAGS_note).empty()) method.Add({"note", absl::GetFlag(FLAGS_note)});
  return method;
}

void PrintUsage() {
  std::cout << absl::ProgramUsageMessage() << "\n\nFlags:\n";
  std::vector<std::pair<std::string, const absl::CommandLineFlag*>> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename().find("bench_main") != std::string::npos) {
      flags.emplace_back(std::string(name), flag);
    }
  }
  std::sort(flags.begin(), flags.end());
  for (const auto& [name, flag] : flags) {
    std::cout << "  --" << name << " (default \"" << flag->DefaultValue() << "\")\n      "
              << flag->Help() << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  // As arbiterd does (server/main.cc): Debian's abseil keeps absl::Mutex's
  // deadlock detection on, a global lock graph updated on every acquisition,
  // gRPC's included; a service client measured with it would time that too.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "arbiter-bench [flags]: the engine's own candidates and arbiterd, measured side by side in "
      "one run (kernels, selection, service, tuning), written as CSV + Markdown under --out; "
      "plot with python3 bench/plot.py OUT. See bench/README.md.");
  // --help prints this binary's flags and exits 0 (absl's own --help exits 1).
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h" || a == "-help") {
      PrintUsage();
      return 0;
    }
  }
  absl::ParseCommandLine(argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the engine's verdict lines would bury the summary

  std::string kind = absl::GetFlag(FLAGS_backend);
  if (kind == "auto") {
    absl::StatusOr<BenchDevice> probe = OpenDevice("cuda", 0);
    kind = probe.ok() ? "cuda" : "cpu";
  }
  const bool gpu = kind == "cuda";
  BenchDevice dev = OrDie(OpenDevice(kind, absl::GetFlag(FLAGS_cpu_threads)));

  const std::string dtype_name = absl::GetFlag(FLAGS_dtype).empty() ? (gpu ? "bf16" : "f32")
                                                                     : absl::GetFlag(FLAGS_dtype);
  const std::optional<DType> dtype = ParseDType(dtype_name);
  if (!dtype) Die(absl::InvalidArgumentError("--dtype: expected f32, f64, f16 or bf16"));
  const std::string grid_name =
      absl::GetFlag(FLAGS_grid).empty() ? (gpu ? "full" : "small") : absl::GetFlag(FLAGS_grid);
  const std::string out = absl::GetFlag(FLAGS_out).empty()
                              ? absl::StrCat("bench/results/", kind)
                              : absl::GetFlag(FLAGS_out);
  if (::mkdir(out.c_str(), 0755) != 0 && errno != EEXIST) {
    Die(absl::UnavailableError(absl::StrCat("--out ", out, ": cannot create")));
  }
  std::map<std::string, bool> sections = SectionsFromFlag();

  SectionOptions options;
  options.measure.warmup_runs = absl::GetFlag(FLAGS_warmup);
  options.measure.min_samples = absl::GetFlag(FLAGS_min_samples);
  options.measure.max_samples = absl::GetFlag(FLAGS_max_samples);
  options.measure.device_budget_seconds = absl::GetFlag(FLAGS_device_budget_s);
  options.measure.wall_budget_seconds = absl::GetFlag(FLAGS_wall_budget_s);
  options.measure.wall_limit_seconds = absl::GetFlag(FLAGS_wall_limit_s);
  options.measure.cold_cache = absl::GetFlag(FLAGS_cold_cache);
  options.measure.hold_launches = absl::GetFlag(FLAGS_hold_launches);
  options.max_gflop = absl::GetFlag(FLAGS_max_gflop);
  options.second_run = absl::GetFlag(FLAGS_second_run);
  options.verbose = !absl::GetFlag(FLAGS_quiet);

  const std::vector<int64_t> squares =
      Int64List("peak_squares", absl::GetFlag(FLAGS_peak_squares).empty()
                                    ? (gpu ? "4096,8192" : "256,512")
                                    : absl::GetFlag(FLAGS_peak_squares));
  const std::string started = UtcNow();
  Rates rates = OrDie(MeasureRates(dev, *dtype, squares, options.measure));
  std::vector<std::string> skipped;

  // Kernels.
  std::optional<Table> kernels;
  if (sections["kernels"]) {
    SectionOptions ko = options;
    ko.budget_seconds = absl::GetFlag(FLAGS_kernels_budget_s);
    kernels = OrDie(RunKernels(dev, OrDie(KernelGrid(grid_name, *dtype)), ko, &rates, &skipped));
    if (auto s = kernels->WriteCsv(out + "/kernels.csv"); !s.ok()) Die(s);
  }

  // Selection and transfer, over the shape list.
  std::optional<Table> selection, transfer;
  std::string shapes_path, shapes_hash;
  ShapeList list;
  if (sections["selection"] || sections["transfer"]) {
    shapes_path = ShapesPathFromFlag();
    list = OrDie(ReadShapeList(shapes_path));
    shapes_hash = list.hash;
  }
  // The engine under test, on a backend of its own with an in-memory store: the
  // one arbiterd runs, under the daemon's sync policy.
  auto engine = [&](ArbiterObserver* observer) {
    BenchDevice engine_dev = OrDie(OpenDevice(kind, absl::GetFlag(FLAGS_cpu_threads)));
    ArbiterOptions ao;
    ao.tuning = TuningPolicy::kSync;
    ao.measure = options.measure;
    std::unique_ptr<Arbiter> a = OrDie(Arbiter::Create(ao, std::move(engine_dev.backend),
                                                       std::move(engine_dev.registry),
                                                       OrDie(VerdictStore::Open(":memory:"))));
    if (observer != nullptr) a->set_observer(observer);
    return a;
  };
  if (sections["selection"]) {
    SectionOptions so = options;
    so.budget_seconds = absl::GetFlag(FLAGS_selection_budget_s);
    selection = OrDie(RunSelection(dev, *engine(nullptr), list.shapes, so, rates, &skipped));
    if (auto s = selection->WriteCsv(out + "/selection.csv"); !s.ok()) Die(s);
  }
  if (sections["transfer"]) {
    std::vector<TransferGroup> groups;
    if (gpu && absl::GetFlag(FLAGS_transfer_issue_table)) groups = IssueTransferGroups();
    for (TransferGroup& g : TransferGroups(list.shapes)) groups.push_back(std::move(g));
    groups = OnlyServedAt(std::move(groups), absl::GetFlag(FLAGS_transfer_shapes));
    TuningTally tally;
    SectionOptions to = options;
    to.budget_seconds = absl::GetFlag(FLAGS_transfer_budget_s);
    transfer = OrDie(RunTransfer(dev, *engine(&tally), tally, groups, to, &skipped));
    if (auto s = transfer->WriteCsv(out + "/transfer.csv"); !s.ok()) Die(s);
  }

  // Service.
  std::optional<ServiceTables> service;
  if (sections["service"]) {
    ServiceOptions so;
    so.arbiterd = absl::GetFlag(FLAGS_arbiterd).empty() ? SelfDir() + "/arbiterd"
                                                        : absl::GetFlag(FLAGS_arbiterd);
    so.backend = kind;
    char scratch[] = "/tmp/arbiter-bench-XXXXXX";
    if (::mkdtemp(scratch) == nullptr) Die(absl::UnavailableError("mkdtemp failed"));
    so.scratch = scratch;
    so.concurrency.clear();
    for (int64_t c : Int64List("concurrency", absl::GetFlag(FLAGS_concurrency))) {
      so.concurrency.push_back(static_cast<int>(c));
    }
    so.seconds_per_point = absl::GetFlag(FLAGS_service_seconds);
    so.rpc_rounds = absl::GetFlag(FLAGS_service_rounds);
    if (so.rpc_rounds < 1) {
      Die(absl::InvalidArgumentError(
          absl::StrCat("--service_rounds: expected >= 1, got ", so.rpc_rounds)));
    }
    so.dtype = *dtype;
    so.matmul_sizes = Int64List("matmul_sizes", absl::GetFlag(FLAGS_matmul_sizes).empty()
                                                    ? (gpu ? "256,512,1024,2048,4096,8192"
                                                           : "128,256,512")
                                                    : absl::GetFlag(FLAGS_matmul_sizes));
    so.matmul_repeats = absl::GetFlag(FLAGS_matmul_repeats);
    so.staging_min_bytes = absl::GetFlag(FLAGS_service_staging_min_bytes);
    for (absl::string_view f : absl::StrSplit(absl::GetFlag(FLAGS_daemon_flags), ',', absl::SkipEmpty())) {
      so.daemon_flags.emplace_back(f);
    }
    so.wire_mib = Int64List("wire_mib", absl::GetFlag(FLAGS_wire_mib).empty()
                                            ? (gpu ? "16,64,256" : "4,16")
                                            : absl::GetFlag(FLAGS_wire_mib));
    const std::string zero_copy = absl::GetFlag(FLAGS_zero_copy);
    if (zero_copy != "auto" && zero_copy != "on" && zero_copy != "off") {
      Die(absl::InvalidArgumentError(
          absl::StrCat("--zero_copy: expected auto, on or off, got \"", zero_copy, "\"")));
    }
    so.zero_copy = zero_copy == "on" || (zero_copy == "auto" && gpu);
    if (!so.zero_copy) {
      skipped.push_back(zero_copy == "off"
                            ? "service zero-copy and host-region rows: --zero_copy=off"
                            : "service zero-copy and host-region rows: the cpu backend has no "
                              "device memory; its "
                              "regions are host shared memory and the target (kernel + 2x the empty "
                              "RPC) is a GPU's (--zero_copy=on runs them anyway)");
    }
    so.verbose = options.verbose;
    service = OrDie(RunService(dev, so));
    if (auto s = service->rpc.WriteCsv(out + "/service_rpc.csv"); !s.ok()) Die(s);
    if (auto s = service->matmul.WriteCsv(out + "/service_matmul.csv"); !s.ok()) Die(s);
    if (!so.wire_mib.empty()) {
      if (auto s = service->wire.WriteCsv(out + "/service_wire.csv"); !s.ok()) Die(s);
    }
    if (so.zero_copy) {
      if (auto s = service->zero_copy.WriteCsv(out + "/service_zero_copy.csv"); !s.ok()) Die(s);
    }
  }

  // Tuning cost.
  std::optional<Table> tuning;
  if (sections["tuning"]) {
    tuning = OrDie(RunTuning(kind, absl::GetFlag(FLAGS_cpu_threads), TuningShapesFromFlag(gpu),
                             absl::GetFlag(FLAGS_tuning_repeats), options.verbose));
    if (auto s = tuning->WriteCsv(out + "/tuning.csv"); !s.ok()) Die(s);
  }

  // The method: in every result folder, as CSV (for the plots) and in the page.
  const DeviceInfo& info = dev.backend->info();
  const Table method = MethodTable(dev, options, rates,
                                   RunDescription{.gpu = gpu,
                                                  .started = started,
                                                  .grid = absl::StrCat(grid_name, " ", dtype_name),
                                                  .shapes_path = shapes_path,
                                                  .shapes_hash = shapes_hash});
  if (auto s = method.WriteCsv(out + "/method.csv"); !s.ok()) Die(s);

  // Summary: the page and the last lines on stdout.
  Table summary({"figure", "value"});
  if (kernels) AddKernelsSummary(*kernels, dev.vendor, &summary);
  if (selection) AddSelectionSummary(*selection, dev.vendor, &summary);
  if (transfer) AddTransferSummary(*transfer, &summary);
  if (service) {
    AddServiceSummary(*service, absl::GetFlag(FLAGS_concurrency).substr(
                                    absl::GetFlag(FLAGS_concurrency).rfind(',') + 1),
                      &summary);
  }
  if (tuning) {
    for (const auto& r : tuning->rows()) {
      summary.Add({absl::StrCat("tuning: one bucket, ", r[0], " ", r[1], "x", r[2], "x", r[3],
                                " (s)"),
                   r[7]});
    }
  }
  summary.Add({"skipped", absl::StrCat(skipped.size())});
  if (auto s = summary.WriteCsv(out + "/summary.csv"); !s.ok()) Die(s);

  std::ofstream page(out + "/README.md");
  page << "# arbiter-bench results: " << info.name << " (" << kind << " backend)\n\n"
       << "Generated by `arbiter-bench` (bench/README.md explains each figure); plots by "
          "`python3 bench/plot.py "
       << out << "`.\n\n## Method\n\n"
       << method.Markdown() << "\n## Summary\n\n"
       << summary.Markdown() << "\n";
  if (kernels) {
    page << "## Kernels\n\n![TFLOP/s against M](kernels_tflops.png)\n\n"
         << "![% of " << dev.vendor << " against M](kernels_vs_vendor.png)\n\n"
         << "Every candidate at every shape: [kernels.csv](kernels.csv).\n\n";
  }
  if (selection) {
    page << "## Selection\n\n![served / floor per shape](selection_floor.png)\n\n"
         << selection->Markdown({"dtype", "m", "n", "k", "served", "best", "tier_default",
                                 "regret", "vendor_vs_best", "tier_vs_best", "served_vs_floor"})
         << "\n" << OverRegret(*selection, 1.03);
  }
  if (transfer) {
    page << "## Transfer\n\nEach bucket measured at one shape (`measured_at`, a store holding "
            "nothing else), then served at other shapes of the same bucket: `served_before` is "
            "what the bucket's verdict serves there, `regret_before` its time over the best of "
            "every candidate timed at that shape. Then each shape is tuned - refined among the "
            "bucket verdict's leaders and tile entrants, which may split the bucket - and "
            "served again "
            "(`served_after`, from the verdict `scope_after`; `regret_after` against the same "
            "best; `regret_after_paired` the median per-round ratio of the two timed "
            "round by round in a race of their own, between `regret_after_low` and "
            "`regret_after_high`, the sign test's 95% bounds: a miss beyond the noise has its "
            "lower bound over 1.03). "
            "`refine_device_s` is the device time of the refinement's timed samples "
            "(a split takes the refinement's race), `refine_wall_s` the wall time of the tune "
            "(setup, oracle and determinism checks included). `best_raced` says whether the "
            "best was among the refinement's entrants; transfer.csv also holds the entrants "
            "with their times in the refinement's own race (`refine_entrants`, us) and its "
            "reason (`refine_reason`).\n\n"
         << transfer->Markdown({"origin", "dtype", "measured_at", "served_at", "served_before",
                                "best", "regret_before", "served_after", "scope_after",
                                "regret_after", "regret_after_paired", "regret_after_low",
                                "regret_after_high", "refine_races", "refine_device_s",
                                "refine_wall_s", "best_raced"})
         << "\n";
  }
  if (service) {
    page << "## Service\n\n![end to end / in-process](service_e2e.png)\n\n"
         << "Select against the empty RPC (grpc.health.v1 Check), same daemon, same clients, in "
         << absl::GetFlag(FLAGS_service_rounds) << " rounds of " << absl::GetFlag(FLAGS_service_seconds)
         << " s each, the two back to back and their order alternating; calls_per_s is the median "
            "round's, vs_empty the median (lowest, highest) of the rounds' select/empty ratios, "
            "p50 and p99 over every call, and the daemon's CPU time per call from /proc:\n\n"
         << service->rpc.Markdown() << "\nMatmul end to end against the same work in-process "
         << "(copy in, the kernel the daemon served, copy out). Paths: bytes = the operands in the "
         << "request and C in the reply; staged = the same bytes-path call from a client library "
         << "as it comes (host staging, on the unix socket from 1 MiB of A, B and C): A and B "
         << "copied into the client's registered host buffer, C out of it, over up to 8 threads, "
         << "inside each timed call; host region = A, B and C in host shared memory (a sealed "
         << "memfd region, on the unix socket) that the daemon copies to its device and back, the "
         << "client's operands already there; + client copies = the client also copies A and B "
         << "into it and C out of it inside each timed call (one thread's memcpy):\n\n"
         << service->matmul.Markdown({"transport", "path", "dtype", "n", "candidate", "e2e_s",
                                      "inprocess_s", "e2e_vs_inprocess", "daemon_device_s"})
         << "\nWhere those Matmuls' time went: the daemon's stages (means over the timed calls, "
         << "from its arbiter_dispatch_stage_seconds histogram: receive = arrival to the request's "
         << "bytes received, prepare = parsing its small fields, checks, region lookups, selection, "
         << "buffers and the response's fields, lease = waiting for a device stream, h2d = operands "
         << "gathered from the received bytes to the device, launch = the kernel enqueued (host), "
         << "kernel = from enqueued to its end seen by the host, d2h = C copied back, send = reply "
         << "sent) and the rest of the end to end (the client's serialize and parse, bytes in "
         << "flight, wake-ups; its copies on the host-region path). A host region's A and B are "
         << "copied in stream order, so their transfer is in the kernel stage, not h2d:\n\n"
         << service->matmul.Markdown({"transport", "path", "dtype", "n", "e2e_s", "receive_s",
                                      "prepare_s",
                                      "lease_s", "h2d_s", "launch_s", "kernel_s", "d2h_s", "send_s",
                                      "client_and_wire_s"})
         << "\n";
    if (!service->zero_copy.rows().empty()) {
      page << "Matmul on zero-copy operands (A, B and C in a region of the daemon's device memory, "
           << "on the unix socket; C checked against the reference first) against the kernel's "
           << "device time plus twice the empty RPC's p50 there:\n\n"
           << service->zero_copy.Markdown({"transport", "path", "dtype", "n", "candidate", "e2e_s",
                                           "daemon_device_s", "empty_rpc_p50_s", "target_s",
                                           "e2e_vs_target", "polling_e2e_s",
                                           "polling_empty_rpc_p50_s", "polling_e2e_vs_target",
                                           "polling_idle_empty_rpc_s", "event_e2e_s",
                                           "event_e2e_vs_target"})
           << "\nWhere the blocking client's zero-copy calls went, by the same stages (launch + "
           << "kernel against daemon_device_s is how late the host saw the kernel end; "
           << "client_and_wire_s is everything outside the daemon). A polling client never sleeps "
           << "waiting for its reply: what it saves is the client's own wake-up; "
           << "polling_idle_empty_rpc_s is its empty RPC after idling as long as the kernel, "
           << "so daemon_device_s + polling_idle_empty_rpc_s is what the zero-copy path costs "
           << "if it adds nothing to an RPC. event_e2e_s: the blocking client's calls with "
           << "completion EVENT (the reply comes once the kernel is enqueued), each timed until "
           << "the client's cudaEventSynchronize on the event it names returned; against the "
           << "same target (empty where the daemon has no events: the CPU backend).\n\n"
           << service->zero_copy.Markdown({"n", "e2e_s", "daemon_device_s", "receive_s",
                                           "prepare_s", "lease_s", "launch_s", "kernel_s", "send_s",
                                           "client_and_wire_s"})
           << "\n";
    }
    if (!service->wire.rows().empty()) {
      page << "The bytes path's wire alone: f32 1 x 1 x K Matmuls (A and B each half the request, "
           << "C one element, so next to no kernel), each call's daemon stages read around it; "
           << "receive_gb_per_s is the request's bytes over the median receive stage:\n\n"
           << service->wire.Markdown() << "\n";
    }
  }
  if (tuning) {
    page << "## Tuning cost\n\nWall time of measuring one bucket (every candidate: oracle, "
            "determinism check, timing) under the daemon's default measure options - what a "
            "sync miss waits for:\n\n"
         << tuning->Markdown() << "\n";
  }
  if (!skipped.empty()) {
    page << "## Skipped\n\n";
    for (const auto& s : skipped) page << "- " << s << "\n";
  }
  page.close();

  std::cout << "arbiter-bench " << kind << " " << info.name << " -> " << out << "\n"
            << summary.Markdown();
  return 0;
}
