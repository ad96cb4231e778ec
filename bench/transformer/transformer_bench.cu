// transformer_bench: every CUDA candidate the daemon would race, checked and then
// timed on the public transformer GEMM list (../shared/eval/transformer-shapes.txt)
// and a few target shapes, next to cublasGemmEx in the same process. What it
// prints last is the kernel evidence behind bench/results/transformer-h200.md:
// per shape each candidate's median, spread, ratio to cuBLAS and to the floor,
// and the geometric mean of served/floor (the best checked candidate per shape
// among those kernels/registry lists, what the daemon serves after measuring)
// against cuBLAS alone. Bench-only baselines and experiments are timed beside
// them but never counted as served.
//
// Correctness first: per shape, random operands in [-1, 1) (never zeros), C and
// a guard past it poisoned with NaN before every candidate; every element of C
// must be written and finite, the guard untouched, and sampled rows (all rows
// of small problems) within the candidate's budget
// |c - ref| <= abs + rel*sqrt(K)*max|ref| + u(dtype)*|ref| against an f64
// reference of the stored operands. Only candidates that pass are timed.
// Also: skinny's ragged and misaligned paths at small shapes in both dtypes,
// run-to-run bitwise repeats and batch invariance (rows of M = m equal to the
// same rows inside M = 128, bit for bit).
//
// Timing: CUDA events around one launch (padding passes and split reductions
// included); before every sample a memset of 2x L2 (the daemon's cold-L2 flush
// until session 10) and, in a second series, a read of 2x L2 (the daemon's since:
// it leaves clean lines only, as serving does);
// 3 warm-up runs, then --reps samples per candidate, interleaved across
// candidates in the daemon's round order (engine/round_order.h: each goes first
// in turn, each after different others) so that clock and power drift hit all
// alike; each sample (flush, events, candidate) enqueued behind the daemon's
// launch hold (launch_hold.cuh), so no host-side launch cost enters a window.
// Before session 14 the order was a fixed rotation with cuBLAS always first
// and the samples unheld.
//
// Files: candidates.{h,cu} (the candidates and their runners), problem.{h,cu}
// (one problem's operands and the correctness check), claims.{h,cu} (the
// per-candidate claims above); this one reads the shapes, times, and prints
// the tables.
//
// usage: transformer_bench [--shapes FILE] [--reps N] [--only SUBSTR] [--skip NAMES] [--quick]
//                          [--lt-ranks N]
// Bench tool: CUDA errors exit on the spot, naming the call.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "bench/kernels/launch_hold.cuh"
#include "bench/transformer/candidates.h"
#include "bench/transformer/claims.h"
#include "bench/transformer/problem.h"
#include "engine/round_order.h"

namespace arbiter::transformer_bench {
namespace {

constexpr double kPeakFlops = 760e12;  // cublasGemmEx's best large-square rate on the H200
constexpr double kPeakBytes = 4.3e12;  // device-to-device copy, bytes read + written

double FloorUs(const Shape& s) {
  const double flops = 2.0 * s.m * s.n * s.k;
  const double bytes = 2.0 * (double(s.m) * s.k + double(s.k) * s.n + double(s.m) * s.n);
  return std::max(flops / kPeakFlops, bytes / kPeakBytes) * 1e6;
}

// Does nothing: its event-timed launch is the part of a small shape's time
// that no kernel can remove.
__global__ void EmptyKernel() {}

struct Timing {
  std::string name;
  bool raced = true;
  double median = 0, iqr = 0;            // after the memset flush
  double median_read = 0, iqr_read = 0;  // after a read flush (clean L2)
  double headroom = 0;
};

std::vector<Shape> ReadShapes(const std::string& path) {
  std::vector<Shape> out;
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    long m, n, kk;
    std::string dt;
    if (ss >> m >> n >> kk >> dt) out.push_back({m, n, kk, dt == "bf16" ? DType::kBF16 : DType::kF16, true});
  }
  return out;
}

}  // namespace
}  // namespace arbiter::transformer_bench

int main(int argc, char** argv) {
  using namespace arbiter::transformer_bench;  // this bench's own files, included above
  std::string shapes_path = "transformer-shapes.txt";
  std::string only, skip;
  int reps = 25;
  bool quick = false, claims = true;
  std::vector<Shape> inline_shapes;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--shapes") && i + 1 < argc) {
      shapes_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));  // 1: one launch each (for a profiler)
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--skip") && i + 1 < argc) {
      skip = argv[++i];
    } else if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--lt-ranks") && i + 1 < argc) {
      // More cuBLASLt heuristic ranks, timed as bench-only candidates.
      g.lt_ranks = std::min(64, std::max(kLtRacedRanks, std::atoi(argv[++i])));
    } else if (!std::strcmp(argv[i], "--no-claims")) {
      claims = false;
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      // MxNxK:dtype, repeatable: these shapes alone (no list, no extras).
      long m, n, kk;
      char dt[8] = "bf16";
      if (std::sscanf(argv[++i], "%ldx%ldx%ld:%7s", &m, &n, &kk, dt) < 3) {
        std::fprintf(stderr, "bad --shape %s\n", argv[i]);
        return 2;
      }
      inline_shapes.push_back({m, n, kk, std::strcmp(dt, "f16") ? DType::kBF16 : DType::kF16, true});
    } else {
      std::fprintf(stderr,
                   "usage: %s [--shapes FILE | --shape MxNxK:dtype ...] [--reps N] [--only SUBSTR] [--skip NAMES] "
                   "[--quick] [--no-claims] [--lt-ranks N]\n",
                   argv[0]);
      return 2;
    }
  }

  const gc::Device device = gc::OpenDevice(&g.cublas);
  CUBLAS_CHECK(cublasLtCreate(&g.lt));
  CUDA_CHECK(cudaMalloc(&g.lt_workspace, g.lt_workspace_bytes));
  g.sm_count = device.props.multiProcessorCount;
  std::printf("device: %s\n", device.Describe().c_str());

  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreate(&st));
  gc::EventTimer timer;
  gc::SampleHold hold;
  std::vector<std::string> expired_at;  // "shape candidate" of each sample whose hold expired
  const gc::L2Flush flush(device.props);
  // Mode 0: a memset (dirty L2, the daemon's flush until session 10); mode 1: a
  // read pass (clean L2, the daemon's flush since: backends/cuda/cuda_stream.cc).
  const auto empty_l2 = [&](int mode, int sample) {
    if (mode == 0) {
      flush.Write(sample, st);
    } else {
      flush.Read(st);
    }
  };
  gc::Checker checker;

  {
    // The launch floor under the same events and flushes as every sample below.
    // Each kernel launched once unheld first: a kernel's first launch loads its
    // module (lazy loading), which may wait for the device - behind a hold, until
    // the hold gives up (run 7's one expired hold).
    empty_l2(0, 0);
    empty_l2(1, 0);
    EmptyKernel<<<1, 32, 0, st>>>();
    CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<double> empty[2];
    for (int r = 0; r < 25; ++r) {
      for (int mode = 0; mode < 2; ++mode) {
        hold.Hold(st);
        empty_l2(mode, r);
        empty[mode].push_back(
            timer.Us(st, [&] { EmptyKernel<<<1, 32, 0, st>>>(); }, [&] { hold.Release(); }));
        hold.Completed();
      }
    }
    CUDA_CHECK(cudaGetLastError());
    std::printf("launch floor: an empty kernel, median of 25: %.1f us after the memset flush, "
                "%.1f us after the read flush\n",
                Percentile(empty[0], 0.5), Percentile(empty[1], 0.5));
  }

  const std::vector<Candidate> candidates = Candidates();
  // --only: comma-separated name fragments (cuBLAS always runs, for the ratio);
  // --skip: comma-separated exact names left out (a kernel that failed its GPU
  // tests would end the process's context at its first check). Served is then
  // the fastest of what is left: the tables print what was skipped.
  const auto named = [](const std::string& names, const std::string& name) {
    std::stringstream list(names);
    for (std::string part; std::getline(list, part, ',');) {
      if (part == name) return true;
    }
    return false;
  };
  const auto wanted = [&only, &skip, &named](const Candidate& c) {
    if (c.name != "cublas" && named(skip, c.name)) return false;
    if (only.empty() || c.name == "cublas") return true;
    std::stringstream list(only);
    for (std::string part; std::getline(list, part, ',');) {
      if (!part.empty() && c.name.find(part) != std::string::npos) return true;
    }
    return false;
  };
  if (!skip.empty()) std::printf("skipped (neither checked nor timed): %s\n", skip.c_str());
  int failures = 0;
  if (claims) {
    // Ragged even N through the cp.async tiles: M, N tails, K below one stage,
    // more tiles than SMs, a vocabulary-sized N.
    const std::vector<Shape> even_n = {
        {128, 130, 64, DType::kBF16, false},   {1, 258, 64, DType::kF16, false},
        {777, 330, 2048, DType::kBF16, false}, {300, 1002, 72, DType::kF16, false},
        {1000, 138, 8, DType::kBF16, false},   {129, 30522, 768, DType::kF16, false},
        {2056, 2050, 64, DType::kBF16, false}, {520, 1034, 1024, DType::kF16, false}};
    for (const Candidate& c : candidates) {
      if (!wanted(c)) continue;
      if (c.name == "skinny") failures += SkinnyClaims(c, st, checker);
      if (c.name == "wgmma_ragged") {
        // Every row misalignment (odd N), N = 2 and 6 mod 8, N below one tile,
        // tiles past N, ragged M, K off the 64-deep k-block, a vocabulary N,
        // more tiles than SMs.
        failures += RaggedChecks(c, {{300, 1001, 520, DType::kF16, false}, {1, 30, 64, DType::kBF16, false},
                                     {129, 30522, 768, DType::kF16, false}, {777, 333, 2048, DType::kBF16, false},
                                     {8, 32001, 1024, DType::kBF16, false}, {2056, 2046, 72, DType::kF16, false},
                                     {17, 131, 65536, DType::kBF16, false}},
                                 st, checker);
      }
      if (c.name == "skinny_ragged") {
        // Both token groups at ragged M, odd and even ragged N, K off the 32-row
        // stage and off 8 (A by elements), strips past N, cluster and workspace
        // split plans, vocabulary-sized N.
        failures += RaggedChecks(c, {{1, 32001, 4096, DType::kBF16, false}, {13, 1001, 77, DType::kF16, false},
                                     {16, 50257, 768, DType::kBF16, false}, {3, 30522, 768, DType::kF16, false},
                                     {16, 9, 4100, DType::kBF16, false}, {8, 333, 2049, DType::kF16, false}},
                                 st, checker);
      }
      if (c.name == "wgmma_bt") {
        // Every token tile at ragged M, K off the 64-deep k-block, partial strips.
        failures += RaggedChecks(c, {{17, 4104, 1000, DType::kBF16, false}, {33, 200, 4104, DType::kF16, false},
                                     {100, 14336, 520, DType::kBF16, false}, {255, 328, 4096, DType::kF16, false},
                                     {192, 9216, 3072, DType::kBF16, false}, {17, 128, 65536, DType::kBF16, false}},
                                 st, checker);
      }
      if (c.name.find("cpasync") != std::string::npos) failures += RaggedChecks(c, even_n, st, checker);
      if (c.name == "mid_stream") {
        // Every token-group member at ragged M, K off the 32-row unit, partial strips
        // (the default config; RaggedChecks runs shapes a config may not take).
        failures += RaggedChecks(c, {{17, 4104, 1000, DType::kBF16, false}, {33, 200, 4104, DType::kF16, false},
                                     {100, 14336, 520, DType::kBF16, false}, {64, 328, 4096, DType::kF16, false},
                                     {128, 9216, 3072, DType::kBF16, false}, {17, 128, 65536, DType::kBF16, false}},
                                 st, checker);
      }
      if (c.name.find("streamk") != std::string::npos) {
        // Owners with one and several contributors, CTA ranges inside one tile,
        // fewer units than SMs, M = 1, M = 96 with a ragged N tile and K off the
        // 64-deep k-block, K = 8.
        failures += RaggedChecks(c, {{96, 3080, 8200, DType::kF16, false}, {1, 4104, 3000, DType::kBF16, false},
                                     {1, 256, 4096, DType::kF16, false}, {300, 1000, 72, DType::kBF16, false},
                                     {1000, 136, 8, DType::kF16, false}, {777, 328, 2048, DType::kBF16, false}},
                                 st, checker);
      }
      if (c.name.find("splitk") != std::string::npos && c.name.find("wgmma") == 0) {
        // Clusters of 1 to 8 CTAs per tile (see WgmmaLaunchGeometry), ragged M.
        failures += RaggedChecks(c, {{16, 256, 4096, DType::kBF16, false}, {1, 4096, 4096, DType::kF16, false},
                                     {100, 4104, 3000, DType::kBF16, false}, {64, 2048, 520, DType::kF16, false},
                                     {777, 328, 2048, DType::kBF16, false}, {200, 14336, 4096, DType::kBF16, false}},
                                 st, checker);
      }
    }
  }

  std::vector<Shape> shapes = inline_shapes.empty() ? ReadShapes(shapes_path) : inline_shapes;
  if (!inline_shapes.empty()) quick = true;
  // Targets of issue 12 beyond the list: M <= 16 against 32 and 112 MiB weights,
  // ragged and odd vocabularies at decode, and the wgmma squares.
  const Shape extra[] = {{1, 4096, 4096, DType::kBF16, false},   {16, 4096, 4096, DType::kBF16, false},
                         {1, 14336, 4096, DType::kBF16, false},  {8, 14336, 4096, DType::kBF16, false},
                         {16, 14336, 4096, DType::kBF16, false}, {128, 14336, 4096, DType::kBF16, false},
                         {8, 30522, 768, DType::kF16, false},    {8, 32001, 4096, DType::kBF16, false},
                         {64, 8192, 8192, DType::kBF16, false},  {4096, 4096, 4096, DType::kBF16, false},
                         {8192, 8192, 8192, DType::kBF16, false}};
  if (!quick) shapes.insert(shapes.end(), std::begin(extra), std::end(extra));

  struct Row {
    Shape s;
    std::vector<Timing> t;
  };
  std::vector<Row> results;
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    Buffers buf;
    buf.s = s;
    Prepare(buf, seed += 11, checker, st);
    const Op op{s.dtype, buf.a, buf.b, buf.c, s.m, s.n, s.k};
    std::vector<const Candidate*> live;
    std::vector<double> headroom;
    for (const Candidate& c : candidates) {
      if (!wanted(c)) continue;
      if (!c.covers(op)) continue;
      const Verdict v = Check(c, buf, op, checker, st);
      std::printf("%-4s %-26s %-22s headroom %-8.3g %s\n", v.ok ? "ok" : "FAIL", ShapeText(s).c_str(),
                  c.name.c_str(), v.headroom, v.why.c_str());
      std::fflush(stdout);
      if (!v.ok) {
        if (c.name != "cublas") ++failures;
        continue;
      }
      live.push_back(&c);
      headroom.push_back(v.headroom);
    }
    // Warm-up, then interleaved cold-L2 samples.
    for (const Candidate* c : live) {
      for (int i = 0; i < (reps > 1 ? 3 : 0); ++i) c->run(op, st);
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    // Samples under both flushes, interleaved: [0] a memset, [1] a read pass (the daemon's).
    std::vector<std::vector<double>> samples[2];
    samples[0].resize(live.size());
    samples[1].resize(live.size());
    for (int r = 0; r < reps; ++r) {
      for (int mode = 0; mode < 2; ++mode) {
        for (size_t i : arbiter::RoundOrder(live.size(), 2 * r + mode)) {
          hold.Hold(st);
          empty_l2(mode, r);
          samples[mode][i].push_back(
              timer.Us(st, [&] { live[i]->run(op, st); }, [&] { hold.Release(); }));
          if (hold.Completed()) expired_at.push_back(ShapeText(s) + " " + live[i]->name);
        }
      }
    }
    CUDA_CHECK(cudaGetLastError());
    Row row;
    row.s = s;
    for (size_t i = 0; i < live.size(); ++i) {
      Timing t;
      t.name = live[i]->name;
      t.raced = live[i]->raced;
      const gc::Summary memset_flush = gc::Summarize(samples[0][i]);
      const gc::Summary read_flush = gc::Summarize(samples[1][i]);
      t.median = memset_flush.median;
      t.iqr = memset_flush.spread;
      t.median_read = read_flush.median;
      t.iqr_read = read_flush.spread;
      t.headroom = headroom[i];
      row.t.push_back(t);
    }
    results.push_back(row);
    Release(buf);
  }

  // ---- tables ----
  std::printf("\n## Per shape: device time us, median of %d cold-L2 samples (IQR/median), "
              "after a memset flush | after a read flush (the daemon's)\n\n", reps);
  std::printf("| shape | candidate | median us | IQR | vs cuBLAS | / floor | read-flush us | IQR | vs cuBLAS | / floor | headroom |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& row : results) {
    double cublas = 0, cublas_read = 0;
    for (const Timing& t : row.t) {
      if (t.name == "cublas") {
        cublas = t.median;
        cublas_read = t.median_read;
      }
    }
    const double floor_us = FloorUs(row.s);
    for (const Timing& t : row.t) {
      std::printf("| %s | %s | %.1f | %.1f%% | %.2fx | %.2f | %.1f | %.1f%% | %.2fx | %.2f | %.3g |\n",
                  ShapeText(row.s).c_str(), (t.name + (t.raced ? "" : " (bench only)")).c_str(),
                  t.median, 100 * t.iqr,
                  cublas > 0 ? cublas / t.median : 0.0, t.median / floor_us, t.median_read,
                  100 * t.iqr_read, cublas_read > 0 ? cublas_read / t.median_read : 0.0,
                  t.median_read / floor_us, t.headroom);
    }
  }
  for (int mode = 0; mode < 2; ++mode) {
    std::printf("\n## Served (best checked raced candidate) against cuBLAS alone, %s\n\n",
                mode == 0 ? "memset flush (dirty L2)" : "read flush (clean L2, the daemon's)");
    std::printf("| shape | floor us | cuBLAS us | cuBLAS/floor | served | served us | IQR | served/floor | speedup | faster bench-only |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    double log_cublas = 0, log_served = 0;
    int listed = 0;
    for (const Row& row : results) {
      const Timing* best = nullptr;
      double cublas = 0;
      auto med = [mode](const Timing& t) { return mode == 0 ? t.median : t.median_read; };
      for (const Timing& t : row.t) {
        if (t.name == "cublas") cublas = med(t);
        if (t.raced && (best == nullptr || med(t) < med(*best))) best = &t;
      }
      // The fastest bench-only candidate, where it beats what is served.
      const Timing* unraced = nullptr;
      for (const Timing& t : row.t) {
        if (!t.raced && best != nullptr && med(t) < med(*best) &&
            (unraced == nullptr || med(t) < med(*unraced))) {
          unraced = &t;
        }
      }
      char unraced_text[96] = "-";
      if (unraced != nullptr) {
        std::snprintf(unraced_text, sizeof unraced_text, "%s %.1f", unraced->name.c_str(), med(*unraced));
      }
      if (best == nullptr || cublas <= 0) continue;
      const double floor_us = FloorUs(row.s);
      std::printf("| %s%s | %.1f | %.1f | %.2f | %s | %.1f | %.1f%% | %.2f | %.2fx | %s |\n",
                  ShapeText(row.s).c_str(), row.s.listed ? "" : " (extra)", floor_us, cublas,
                  cublas / floor_us, best->name.c_str(), med(*best),
                  100 * (mode == 0 ? best->iqr : best->iqr_read), med(*best) / floor_us,
                  cublas / med(*best), unraced_text);
      if (row.s.listed) {
        log_cublas += std::log(cublas / floor_us);
        log_served += std::log(med(*best) / floor_us);
        ++listed;
      }
    }
    if (listed > 0) {
      std::printf("\ntransformer-shapes (%s): geometric mean over %d shapes: served/floor %.3f, "
                  "cuBLAS alone/floor %.3f\n", mode == 0 ? "memset flush" : "read flush", listed,
                  std::exp(log_served / listed), std::exp(log_cublas / listed));
    }
  }
  std::printf("\nlaunch holds that expired before their release: %d (a launch waited for the "
              "device; its sample carried its host-side cost)\n", hold.expired());
  for (const std::string& at : expired_at) std::printf("  expired: %s\n", at.c_str());
  std::printf("\n%s: %d correctness failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
