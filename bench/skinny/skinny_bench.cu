// skinny_bench: correctness, then device time, of every skinny_stream config
// (kernels/skinny/skinny_stream.h) next to cublasGemmEx and gemv, for
// decode-sized M against transformer weights, in one process on
// one device.
//
// Correctness first, at every shape and in f16 and bf16: random operands in
// [-1, 1) (never zeros), an f64 device reference over the operands as stored,
// C and a guard past it poisoned with NaN before every run; every element must
// be written, finite and within the family's budget, the guard untouched. A
// failure prints FAIL and makes the exit status 1; a failed candidate is not
// timed. Ragged and tiny shapes (--check_shapes) are checked only.
//
// Timing (bf16, --shapes): CUDA events around the launch(es) alone, after
// warm-up, with L2 emptied before every sample by reading a buffer of twice its
// size (clean lines: no write-back under the timed kernel); median, IQR/median
// and min of --reps samples, candidates interleaved sample by sample so that
// clock drift lands on all of them alike. Floor = bytes moved (A, B, C once) /
// --bandwidth (default 4.2 TB/s, the H200's measured copy rate; the copy rate
// of this device is measured and printed too).
//
// Output: check lines, then (with --out DIR) DIR/skinny_bench.md with every
// figure, and last on stdout one row per shape (median us and x floor per
// candidate) and each candidate's geometric-mean x floor by weight size.
//
// usage: skinny_bench [--reps N] [--shapes MxNxK,...] [--check_shapes MxNxK,...]
//                     [--candidates NAME,...] [--bandwidth TB/s] [--out DIR]
// (--candidates keeps cuBLAS first and the named others, e.g. for a profiler.)

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "engine/dtype.h"
#include "kernels/gemv/gemv.h"
#include "kernels/skinny/skinny_stream.h"

#ifndef ARBITER_BENCH_COMMIT
#define ARBITER_BENCH_COMMIT "unknown"
#endif

namespace {

using arbiter::DType;
using arbiter::ElementSize;
using arbiter::UnitRoundoff;
namespace k = arbiter::kernels;
namespace gc = arbiter::gemm_check;
using gc::ParseShapes;
using gc::Shape;
using gc::ShapeText;

// M in {1, 4, 8, 16, 32, 64} against the weights of decode GEMMs: 4096x4096
// (32 MiB in bf16), 14336x4096 and 4096x14336 (112 MiB), 28672x4096 (224 MiB)
// and a ragged vocabulary projection (30522 x 768, N % 8 == 2).
std::vector<Shape> DefaultShapes() {
  const Shape weights[] = {{0, 4096, 4096}, {0, 14336, 4096}, {0, 4096, 14336},
                           {0, 28672, 4096}, {0, 30522, 768}};
  std::vector<Shape> out;
  for (const Shape& w : weights) {
    for (int64_t m : {1, 4, 8, 16, 32, 64}) out.push_back({m, w.n, w.k});
  }
  return out;
}

// Every copy width (N % 8 == 0, even N, odd N), K % 8 != 0 (A by elements),
// partial strips and token groups, narrow N with long K (workspace splits),
// a single element, and N past 2^18.
std::vector<Shape> DefaultCheckShapes() {
  return {{1, 1, 1},        {3, 9, 127},     {5, 131, 257},   {13, 333, 2049}, {16, 16, 65536},
          {17, 30522, 96},  {33, 1030, 4095}, {64, 72, 1000}, {40, 4094, 777}, {7, 4100, 3000},
          {9, 264, 1024},   {57, 2048, 520},  {2, 300001, 40}, {24, 520, 8200}, {64, 1, 300}};
}

// ---- candidates ---------------------------------------------------------------------

struct Context {
  int sm_count = 0;
  cublasHandle_t cublas = nullptr;
  gc::Scratch workspace;
};
Context g_ctx;

// A candidate's launch: cudaErrorInvalidValue means "not built for this
// shape or dtype" (a skinny_stream config) and skips it; any other launch
// error fails the candidate at that shape.
using RunFn = std::function<cudaError_t(k::LaunchArgs&, cudaStream_t)>;

struct Candidate {
  std::string name;
  int64_t max_m;
  double abs, rel;  // budget; rel < 0: informational (cuBLAS), never fails the run
  RunFn run;
};

RunFn FromLauncher(const k::Launcher& launcher) {
  return [launcher](k::LaunchArgs& args, cudaStream_t stream) {
    return gc::Launch(launcher, args, g_ctx.workspace, stream);
  };
}

RunFn FromConfig(const k::SkinnyStreamConfig& config) {
  return [config](k::LaunchArgs& args, cudaStream_t stream) {
    args.workspace_bytes = k::SkinnyStreamWorkspaceBytes(args, config);
    args.workspace = g_ctx.workspace.Get(args.workspace_bytes);
    return k::LaunchSkinnyStream(args, config, stream);
  };
}

cudaError_t Cublas(k::LaunchArgs& op, cudaStream_t stream) {
  gc::RowMajorGemmEx(g_ctx.cublas, op.dtype, op.m, op.n, op.k, op.a, op.k, op.b, op.n, op.c, op.n,
                     stream);
  return cudaSuccess;
}

std::vector<Candidate> Candidates() {
  std::vector<Candidate> out;
  out.push_back({"cublas", INT64_MAX, 1e-5, -2e-6, Cublas});
  out.push_back(
      {"gemv", k::kGemvMaxM, k::kGemvBudgetAbs, k::kGemvBudgetRel, FromLauncher(k::kGemv)});
  for (const k::SkinnyStreamConfig& config : k::kSkinnyStreamConfigs) {
    out.push_back({config.name, k::kSkinnyStreamMaxM, k::kSkinnyStreamBudgetAbs,
                   k::kSkinnyStreamBudgetRel, FromConfig(config)});
  }
  return out;
}

// ---- device buffers and the run ----------------------------------------------------

struct Buffers {
  void *a = nullptr, *b = nullptr, *c = nullptr;
  double* ref = nullptr;
};

using Timing = gc::Summary;  // device time, microseconds; median 0: not timed

enum class Verdict { kOk, kFail, kWarn, kNotBuilt };

class Bench {
 public:
  Bench(int reps, double bandwidth, cudaStream_t stream, const Buffers& buf,
        const gc::L2Flush& flush)
      : reps_(reps), bandwidth_(bandwidth), stream_(stream), buf_(buf), flush_(flush) {}

  int failures() const { return failures_; }
  const std::vector<std::string>& log() const { return log_; }

  // Fills operands, computes the reference and checks every candidate;
  // returns the verdict per candidate.
  std::vector<Verdict> Check(const Shape& s, DType dtype, const std::vector<Candidate>& cands) {
    static uint64_t seed = 1;
    const int64_t mn = s.m * s.n;
    gc::ForDtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      gc::FillKernel<T><<<1024, 256, 0, stream_>>>(static_cast<T*>(buf_.a), s.m * s.k, seed++);
      gc::FillKernel<T><<<1024, 256, 0, stream_>>>(static_cast<T*>(buf_.b), s.k * s.n, seed++);
      gc::LaunchReference(static_cast<const T*>(buf_.a), static_cast<const T*>(buf_.b), nullptr,
                          s.m, buf_.ref, s.n, s.k, stream_);
    });
    const double max_ref = checker_.MaxAbs(buf_.ref, mn, stream_);

    std::vector<Verdict> out;
    for (const Candidate& cand : cands) {
      if (s.m > cand.max_m) {
        out.push_back(Verdict::kNotBuilt);
        continue;
      }
      const size_t es = ElementSize(dtype);
      gc::Checker::Poison(buf_.c, s.m, s.n, es, stream_);
      k::LaunchArgs args = Args(s, dtype);
      const cudaError_t err = cand.run(args, stream_);
      if (err == cudaErrorInvalidValue) {
        out.push_back(Verdict::kNotBuilt);
        continue;
      }
      if (err != cudaSuccess) {
        // A launch the device refused (say, a cluster that does not fit) fails
        // this candidate; the rest of the run goes on.
        ++failures_;
        std::printf("FAIL %-18s %-10s %-4s launch: %s\n", ShapeText(s).c_str(),
                    cand.name.c_str(), gc::Name(dtype), cudaGetErrorName(err));
        cudaGetLastError();
        out.push_back(Verdict::kFail);
        continue;
      }
      CUDA_CHECK(cudaGetLastError());
      const double rel = std::fabs(cand.rel);
      const double fixed_tol = cand.abs + rel * std::sqrt(static_cast<double>(s.k)) * max_ref;
      gc::CheckResult r;
      gc::ForDtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        r = checker_.Check(static_cast<const T*>(buf_.c), s.m, s.n, nullptr, s.m, buf_.ref,
                           fixed_tol, UnitRoundoff(dtype), stream_);
      });
      const double max_err = gc::FromBits(r.max_err_bits);
      const bool ok = r.nonfinite == 0 && r.out_of_budget == 0 && r.guard_touched == 0;
      const bool informational = cand.rel < 0;
      const Verdict v = ok ? Verdict::kOk : informational ? Verdict::kWarn : Verdict::kFail;
      if (v == Verdict::kFail) ++failures_;
      char line[320];
      std::snprintf(line, sizeof line,
                    "%-4s %-18s %-10s %-4s max|err| %.3g (budget %.3g)  [%llu unwritten or "
                    "non-finite, %llu over budget, guard %llu, first C[%lld,%lld]]",
                    v == Verdict::kOk ? "ok" : v == Verdict::kWarn ? "WARN" : "FAIL",
                    ShapeText(s).c_str(), cand.name.c_str(), gc::Name(dtype), max_err, fixed_tol,
                    r.nonfinite, r.out_of_budget, r.guard_touched,
                    r.first_bad == ~0ull ? -1LL : static_cast<long long>(r.first_bad / s.n),
                    r.first_bad == ~0ull ? -1LL : static_cast<long long>(r.first_bad % s.n));
      log_.push_back(line);
      if (v != Verdict::kOk) std::printf("%s\n", line);
      out.push_back(v);
    }
    return out;
  }

  // Times the candidates that passed, interleaved: each round one cold-L2
  // sample of each.
  std::vector<Timing> Time(const Shape& s, const std::vector<Candidate>& cands,
                           const std::vector<Verdict>& verdicts) {
    std::vector<std::vector<double>> samples(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      if (verdicts[i] != Verdict::kOk && verdicts[i] != Verdict::kWarn) continue;
      for (int w = 0; w < 3; ++w) Launch(cands[i], s);
    }
    for (int rep = 0; rep < reps_; ++rep) {
      for (size_t i = 0; i < cands.size(); ++i) {
        if (verdicts[i] != Verdict::kOk && verdicts[i] != Verdict::kWarn) continue;
        flush_.Read(stream_);
        samples[i].push_back(timer_.Us(stream_, [&] { Launch(cands[i], s); }));
      }
    }
    std::vector<Timing> out(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      if (!samples[i].empty()) out[i] = gc::Summarize(samples[i]);
    }
    return out;
  }

  double FloorUs(const Shape& s) const { return Bytes(s) / (bandwidth_ * 1e12) * 1e6; }
  static double Bytes(const Shape& s) {
    return 2.0 * static_cast<double>(s.m * s.k + s.k * s.n + s.m * s.n);
  }

 private:
  k::LaunchArgs Args(const Shape& s, DType dtype) const {
    return gc::Args(dtype, buf_.a, buf_.b, buf_.c, s.m, s.n, s.k, g_ctx.sm_count);
  }

  void Launch(const Candidate& cand, const Shape& s) {
    k::LaunchArgs args = Args(s, DType::kBF16);
    CUDA_CHECK(cand.run(args, stream_));
  }

  int reps_;
  double bandwidth_;
  cudaStream_t stream_;
  Buffers buf_;
  const gc::L2Flush& flush_;
  gc::Checker checker_;
  gc::EventTimer timer_;
  int failures_ = 0;
  std::vector<std::string> log_;
};

// Device-to-device copy rate, bytes read + written, median of 7 copies of 1 GiB.
double CopyTbPerSecond(cudaStream_t stream) {
  const size_t bytes = size_t{1} << 30;
  void *src, *dst;
  CUDA_CHECK(cudaMalloc(&src, bytes));
  CUDA_CHECK(cudaMalloc(&dst, bytes));
  CUDA_CHECK(cudaMemsetAsync(src, 1, bytes, stream));
  gc::EventTimer timer;
  std::vector<double> rates;
  for (int i = 0; i < 8; ++i) {
    const double us = timer.Us(stream, [&] {
      CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    });
    if (i > 0) rates.push_back(2.0 * bytes / (us * 1e-6) / 1e12);
  }
  CUDA_CHECK(cudaFree(src));
  CUDA_CHECK(cudaFree(dst));
  return gc::Percentile(rates, 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 25;
  double bandwidth = 4.2;
  std::string out_dir;
  std::vector<Shape> shapes = DefaultShapes();
  std::vector<Shape> check_shapes = DefaultCheckShapes();
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(5, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--shapes") && i + 1 < argc) {
      shapes = ParseShapes(argv[++i]);
    } else if (!std::strcmp(argv[i], "--check_shapes") && i + 1 < argc) {
      check_shapes = ParseShapes(argv[++i]);
    } else if (!std::strcmp(argv[i], "--candidates") && i + 1 < argc) {
      only = std::string(",") + argv[++i] + ",";
    } else if (!std::strcmp(argv[i], "--bandwidth") && i + 1 < argc) {
      bandwidth = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) {
      out_dir = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--reps N] [--shapes MxNxK,...] [--check_shapes MxNxK,...] "
                   "[--candidates NAME,...] [--bandwidth TB/s] [--out DIR]\n",
                   argv[0]);
      return 2;
    }
  }

  const gc::Device device = gc::OpenDevice(&g_ctx.cublas);
  g_ctx.sm_count = device.props.multiProcessorCount;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  const double copy_rate = CopyTbPerSecond(stream);
  char header[512];
  std::snprintf(header, sizeof header,
                "skinny_bench at %s, %s: %s; copy rate %.2f TB/s (read + write); floor at %.2f "
                "TB/s; %d cold-L2 samples per candidate, interleaved",
                ARBITER_BENCH_COMMIT, date, device.Describe().c_str(), copy_rate, bandwidth, reps);
  std::printf("%s\n", header);

  size_t max_a = 0, max_b = 0, max_c = 0;
  for (const auto* list : {&shapes, &check_shapes}) {
    for (const Shape& s : *list) {
      max_a = std::max<size_t>(max_a, s.m * s.k);
      max_b = std::max<size_t>(max_b, s.k * s.n);
      max_c = std::max<size_t>(max_c, s.m * s.n);
    }
  }
  Buffers buf;
  CUDA_CHECK(cudaMalloc(&buf.a, max_a * 2));
  CUDA_CHECK(cudaMalloc(&buf.b, max_b * 2));
  CUDA_CHECK(cudaMalloc(&buf.c, max_c * 2 + gc::kGuardBytes));
  CUDA_CHECK(cudaMalloc(&buf.ref, max_c * sizeof(double)));
  const gc::L2Flush flush(device.props);

  std::vector<Candidate> cands = Candidates();
  if (!only.empty()) {
    // cuBLAS stays first: the ratios are to it.
    cands.erase(std::remove_if(cands.begin() + 1, cands.end(),
                               [&](const Candidate& c) {
                                 return only.find("," + c.name + ",") == std::string::npos;
                               }),
                cands.end());
  }
  Bench bench(reps, bandwidth, stream, buf, flush);

  for (const Shape& s : check_shapes) {
    for (DType dtype : {DType::kF16, DType::kBF16}) bench.Check(s, dtype, cands);
  }
  std::vector<std::vector<Timing>> timings;
  std::vector<std::vector<Verdict>> verdicts;
  for (const Shape& s : shapes) {
    bench.Check(s, DType::kF16, cands);
    verdicts.push_back(bench.Check(s, DType::kBF16, cands));
    timings.push_back(bench.Time(s, cands, verdicts.back()));
  }

  // Full table to the file; compact table and summary last on stdout.
  auto cell = [&](const Shape& s, const Timing& t, Verdict v) -> std::string {
    if (v == Verdict::kNotBuilt) return "-";
    if (v == Verdict::kFail) return "FAIL";
    char text[48];
    std::snprintf(text, sizeof text, "%.1f (%.2f)", t.median, t.median / bench.FloorUs(s));
    return text;
  };
  if (!out_dir.empty()) {
    const std::string path = out_dir + "/skinny_bench.md";
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 2;
    }
    std::fprintf(f, "# %s\n\n", header);
    std::fprintf(f, "| shape (MxNxK) | candidate | median us | IQR/median | min us | GB/s | "
                    "x floor | time / cuBLAS |\n|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < shapes.size(); ++i) {
      const double cublas_us = timings[i][0].median;
      for (size_t c = 0; c < cands.size(); ++c) {
        const Timing& t = timings[i][c];
        if (t.median <= 0) continue;
        std::fprintf(f, "| %s | %s | %.2f | %.1f%% | %.2f | %.0f | %.3f | %.3f |\n",
                     ShapeText(shapes[i]).c_str(), cands[c].name.c_str(), t.median,
                     100 * t.spread, t.min, Bench::Bytes(shapes[i]) / (t.median * 1e3),
                     t.median / bench.FloorUs(shapes[i]),
                     cublas_us > 0 ? t.median / cublas_us : 0.0);
      }
    }
    std::fprintf(f, "\n## checks\n\n```\n");
    for (const std::string& line : bench.log()) std::fprintf(f, "%s\n", line.c_str());
    std::fprintf(f, "```\n");
    std::fclose(f);
  }

  std::printf("\n## bf16 median us (x floor); floor = bytes / %.2f TB/s\n\n| shape | floor |",
              bandwidth);
  for (const Candidate& c : cands) std::printf(" %s |", c.name.c_str());
  std::printf("\n|---|---|");
  for (size_t c = 0; c < cands.size(); ++c) std::printf("---|");
  std::printf("\n");
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::printf("| %s | %.1f |", ShapeText(shapes[i]).c_str(), bench.FloorUs(shapes[i]));
    for (size_t c = 0; c < cands.size(); ++c) {
      std::printf(" %s |", cell(shapes[i], timings[i][c], verdicts[i][c]).c_str());
    }
    std::printf("\n");
  }

  // Geometric means of x floor and of time / cuBLAS, over the shapes a
  // candidate ran, by M range and weight size (the targets of issue 12).
  struct Group {
    const char* name;
    std::function<bool(const Shape&)> in;
  };
  const Group groups[] = {
      {"M<=16, B>=64MiB", [](const Shape& s) { return s.m <= 16 && s.n * s.k * 2 >= (64 << 20); }},
      {"M<=16, B<64MiB", [](const Shape& s) { return s.m <= 16 && s.n * s.k * 2 < (64 << 20); }},
      {"M 17..64", [](const Shape& s) { return s.m > 16; }},
  };
  std::printf("\n## geometric mean: x floor / time vs cuBLAS (shapes run)\n\n| candidate |");
  for (const Group& g : groups) std::printf(" %s |", g.name);
  std::printf("\n|---|");
  for (size_t g = 0; g < std::size(groups); ++g) std::printf("---|");
  std::printf("\n");
  for (size_t c = 0; c < cands.size(); ++c) {
    std::printf("| %s |", cands[c].name.c_str());
    for (const Group& g : groups) {
      double log_floor = 0, log_cublas = 0;
      int count = 0;
      for (size_t i = 0; i < shapes.size(); ++i) {
        const Timing& t = timings[i][c];
        if (!g.in(shapes[i]) || t.median <= 0 || timings[i][0].median <= 0) continue;
        log_floor += std::log(t.median / bench.FloorUs(shapes[i]));
        log_cublas += std::log(t.median / timings[i][0].median);
        ++count;
      }
      if (count == 0) {
        std::printf(" - |");
      } else {
        std::printf(" %.2f / %.2f (%d) |", std::exp(log_floor / count),
                    std::exp(log_cublas / count), count);
      }
    }
    std::printf("\n");
  }
  std::printf("\n%s: %d correctness failure(s)\n", bench.failures() ? "FAIL" : "PASS",
              bench.failures());
  return bench.failures() ? 1 : 0;
}
