// cuda_kernels_check: correctness, then device time, of the hand-written CUDA
// kernel families (kernels/{mma_warp,mma_tiled,splitk,gemv,simt}) next to
// cublasGemmEx, in one process on one device.
//
// Correctness: for each shape and dtype, random operands in [-1, 1) (never
// zeros), an f64 reference computed on the device over the operands as stored,
// C and a guard past it poisoned with NaN before every run; every element must
// be written, finite and within the family's budget (engine/contract.h:
// |c - ref| <= abs + rel*sqrt(K)*max|ref| + u(dtype)*|ref|), and the guard
// untouched. Any failure is printed as FAIL and makes the exit status 1.
// Headroom = budget rel / measured rel, where measured rel = max over elements
// of max(0, |c - ref| - u*|ref|) / (sqrt(K) * max|ref|).
//
// Timing (bf16): CUDA events around the launch alone, after warm-up, with L2
// flushed (a 2x L2 buffer memset) before every sample; median, IQR/median and
// min of --reps samples.
//
// usage: cuda_kernels_check [--reps N] [--shapes MxNxK,...]
// Bench tool: CUDA errors exit on the spot, naming the call.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "engine/dtype.h"
#include "kernels/gemv/gemv.h"
#include "kernels/mma_tiled/mma_tiled.h"
#include "kernels/mma_warp/mma_warp.h"
#include "kernels/simt/simt.h"
#include "kernels/splitk/splitk.h"

namespace {

using arbiter::DType;
using arbiter::ElementSize;   // engine/dtype.h
using arbiter::UnitRoundoff;
namespace k = arbiter::kernels;
using namespace arbiter::gemm_check;  // NOLINT: the bench tools' shared checker

// ---- the candidates ---------------------------------------------------------------

struct Candidate {
  std::string name;
  std::vector<DType> dtypes;
  int64_t max_m;
  double abs, rel;  // budget; rel <= 0: informational (cuBLAS), never fails the run
  std::function<void(const Op&, cudaStream_t)> run;
};

struct Context {
  int sm_count = 0;
  cublasHandle_t cublas = nullptr;
  Scratch workspace;
};
Context g_ctx;

// The family behind `launcher`, as a Candidate's run.
std::function<void(const Op&, cudaStream_t)> Run(const k::Launcher& launcher) {
  return [launcher](const Op& op, cudaStream_t stream) {
    RunFamily(launcher, op, g_ctx.sm_count, g_ctx.workspace, stream);
  };
}

void Cublas(const Op& op, cudaStream_t stream) { RowMajorGemmEx(g_ctx.cublas, op, stream); }

std::vector<Candidate> Candidates() {
  const std::vector<DType> half = {DType::kF16, DType::kBF16};
  const int64_t any = INT64_MAX;
  std::vector<Candidate> out;
  out.push_back(
      {"mma_warp", half, any, k::kMmaWarpBudgetAbs, k::kMmaWarpBudgetRel, Run(k::kMmaWarp)});
  out.push_back(
      {"mma_tiled", half, any, k::kMmaTiledBudgetAbs, k::kMmaTiledBudgetRel, Run(k::kMmaTiled)});
  out.push_back(
      {"splitk", half, any, k::kSplitKBudgetAbs, k::kSplitKBudgetRel, Run(k::kSplitK)});
  out.push_back({"splitk_atomic", half, any, k::kSplitKBudgetAbs, k::kSplitKBudgetRel,
                 Run(k::kSplitKAtomic)});
  out.push_back(
      {"gemv", half, k::kGemvMaxM, k::kGemvBudgetAbs, k::kGemvBudgetRel, Run(k::kGemv)});
  out.push_back({"simt", {DType::kF16, DType::kBF16, DType::kF32}, any, k::kSimtBudgetAbs,
                 k::kSimtBudgetRel, Run(k::kSimt)});
  out.push_back({"cublasGemmEx", {DType::kF16, DType::kBF16, DType::kF32}, any, 1e-5, -2e-6,
                 Cublas});
  return out;
}

// ---- the run --------------------------------------------------------------------

struct Timing {
  std::string shape, name;
  Summary us;  // device time, microseconds
  double tflops = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 25;
  std::vector<Shape> shapes = {{1, 1, 1},       {1, 4096, 4096},    {16, 16, 65536},
                               {777, 333, 2049}, {64, 8192, 8192},   {1024, 1024, 1024},
                               {2048, 2048, 2048}, {4095, 4095, 4095}};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(3, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--shapes") && i + 1 < argc) {
      shapes = ParseShapes(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--shapes MxNxK,...]\n", argv[0]);
      return 2;
    }
  }

  const Device device = OpenDevice(&g_ctx.cublas);
  g_ctx.sm_count = device.props.multiProcessorCount;
  std::printf("device: %s\n", device.Describe().c_str());

  size_t max_a = 0, max_b = 0, max_c = 0;
  for (const Shape& s : shapes) {
    max_a = std::max<size_t>(max_a, s.m * s.k);
    max_b = std::max<size_t>(max_b, s.k * s.n);
    max_c = std::max<size_t>(max_c, s.m * s.n);
  }
  void *a, *b, *c;
  double* ref;
  CUDA_CHECK(cudaMalloc(&a, max_a * 4));
  CUDA_CHECK(cudaMalloc(&b, max_b * 4));
  CUDA_CHECK(cudaMalloc(&c, max_c * 4 + kGuardBytes));
  CUDA_CHECK(cudaMalloc(&ref, max_c * sizeof(double)));
  Checker checker;
  const L2Flush flush(device.props);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  EventTimer timer;

  const std::vector<Candidate> candidates = Candidates();
  int failures = 0;
  uint64_t seed = 1;
  std::vector<Timing> timings;

  for (const Shape& s : shapes) {
    for (DType dtype : {DType::kF16, DType::kBF16, DType::kF32}) {
      const size_t es = ElementSize(dtype);
      const int64_t mn = s.m * s.n;
      ForDtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        FillKernel<T><<<1024, 256, 0, stream>>>(static_cast<T*>(a), s.m * s.k, seed++);
        FillKernel<T><<<1024, 256, 0, stream>>>(static_cast<T*>(b), s.k * s.n, seed++);
        LaunchReference(static_cast<const T*>(a), static_cast<const T*>(b), nullptr, s.m, ref,
                        s.n, s.k, stream);
      });
      const double max_ref = checker.MaxAbs(ref, mn, stream);

      const Op op{dtype, a, b, c, s.m, s.n, s.k};
      for (const Candidate& cand : candidates) {
        if (std::find(cand.dtypes.begin(), cand.dtypes.end(), dtype) == cand.dtypes.end()) continue;
        if (s.m > cand.max_m) continue;
        Checker::Poison(c, s.m, s.n, es, stream);
        cand.run(op, stream);
        CUDA_CHECK(cudaGetLastError());
        const double rel = std::fabs(cand.rel);
        const double fixed_tol = cand.abs + rel * std::sqrt(static_cast<double>(s.k)) * max_ref;
        CheckResult r;
        ForDtype(dtype, [&](auto tag) {
          using T = decltype(tag);
          r = checker.Check(static_cast<const T*>(c), s.m, s.n, nullptr, s.m, ref, fixed_tol,
                            UnitRoundoff(dtype), stream);
        });
        const double max_err = FromBits(r.max_err_bits);
        const double max_excess = FromBits(r.max_excess_bits);
        const double measured = max_ref > 0 ? max_excess / (std::sqrt(double(s.k)) * max_ref) : 0;
        const bool ok = r.nonfinite == 0 && r.out_of_budget == 0 && r.guard_touched == 0;
        const bool informational = cand.rel < 0;
        if (!ok && !informational) ++failures;
        std::printf("%-5s %-16s %-14s %s  max|err| %.3g  max|ref| %.3g  rel/sqrt(K) %.3g  "
                    "headroom %s",
                    ok ? "ok" : (informational ? "WARN" : "FAIL"), ShapeText(s).c_str(),
                    cand.name.c_str(), Name(dtype), max_err, max_ref, measured,
                    measured > 0 ? std::to_string(rel / measured).substr(0, 8).c_str() : "inf");
        if (!ok) {
          std::printf("  [%llu unwritten/non-finite, %llu over budget, guard %llu, "
                      "first C[%lld,%lld]]",
                      r.nonfinite, r.out_of_budget, r.guard_touched,
                      static_cast<long long>(r.first_bad / s.n),
                      static_cast<long long>(r.first_bad % s.n));
        }
        std::printf("\n");
        std::fflush(stdout);

        if (dtype != DType::kBF16) continue;
        // Timing, bf16 only: warm-up, then cold-L2 samples.
        for (int i = 0; i < 3; ++i) cand.run(op, stream);
        std::vector<double> samples;
        for (int i = 0; i < reps; ++i) {
          flush.Write(i, stream);
          samples.push_back(timer.Us(stream, [&] { cand.run(op, stream); }));
        }
        CUDA_CHECK(cudaGetLastError());
        Timing t;
        t.shape = ShapeText(s);
        t.name = cand.name;
        t.us = Summarize(samples);
        t.tflops = 2.0 * s.m * s.n * s.k / (t.us.median * 1e-6) / 1e12;
        timings.push_back(t);
      }
    }
  }

  std::printf("\n## bf16, cold L2, %d samples each (device time, CUDA events)\n\n", reps);
  std::printf("| shape (MxNxK) | candidate | median us | IQR/median | min us | TFLOP/s "
              "| vs cuBLAS |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Timing& t : timings) {
    double cublas_us = 0;
    for (const Timing& u : timings) {
      if (u.shape == t.shape && u.name == "cublasGemmEx") cublas_us = u.us.median;
    }
    std::printf("| %s | %s | %.1f | %.1f%% | %.1f | %.1f | %.2fx |\n", t.shape.c_str(),
                t.name.c_str(), t.us.median, 100 * t.us.spread, t.us.min, t.tflops,
                cublas_us > 0 ? cublas_us / t.us.median : 0.0);
  }
  std::printf("\n%s: %d correctness failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
