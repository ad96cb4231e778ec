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

template <typename F>
void ForDtype(DType d, F&& f) {
  switch (d) {
    case DType::kF32: f(float{}); break;
    case DType::kF64: f(double{}); break;
    case DType::kF16: f(__half{}); break;
    case DType::kBF16: f(__nv_bfloat16{}); break;
  }
}

// ---- the candidates ---------------------------------------------------------------

struct Op {
  DType dtype;
  const void* a;
  const void* b;
  void* c;
  int64_t m, n, k;
};

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
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
Context g_ctx;

void* Workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > g_ctx.workspace_bytes) {
    CUDA_CHECK(cudaFree(g_ctx.workspace));
    CUDA_CHECK(cudaMalloc(&g_ctx.workspace, bytes));
    g_ctx.workspace_bytes = bytes;
  }
  return g_ctx.workspace;
}

// Launches `launcher` for `op` with the scratch it asks for; exits on a launch error.
void Launch(const k::Launcher& launcher, const Op& op, cudaStream_t stream) {
  k::LaunchArgs args;
  args.dtype = op.dtype;
  args.a = op.a;
  args.b = op.b;
  args.c = op.c;
  args.m = op.m;
  args.n = op.n;
  args.k = op.k;
  args.sm_count = g_ctx.sm_count;
  if (launcher.workspace_bytes != nullptr) {
    args.workspace_bytes = launcher.workspace_bytes(args);
    args.workspace = Workspace(args.workspace_bytes);
  }
  const cudaError_t err = launcher.launch(args, stream);
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s (%s)\n", launcher.name, cudaGetErrorName(err),
                 cudaGetErrorString(err));
    std::exit(2);
  }
}

// The family behind `launcher`, as a Candidate's run.
std::function<void(const Op&, cudaStream_t)> Run(const k::Launcher& launcher) {
  return [launcher](const Op& op, cudaStream_t stream) { Launch(launcher, op, stream); };
}

void Cublas(const Op& op, cudaStream_t stream) {
  cudaDataType_t type = op.dtype == DType::kF16    ? CUDA_R_16F
                        : op.dtype == DType::kBF16 ? CUDA_R_16BF
                                                   : CUDA_R_32F;
  const float alpha = 1.f, beta = 0.f;
  CUBLAS_CHECK(cublasSetStream(g_ctx.cublas, stream));
  // Row-major C = A B is column-major C^T = B^T A^T.
  CUBLAS_CHECK(cublasGemmEx(g_ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(op.n),
                            static_cast<int>(op.m), static_cast<int>(op.k), &alpha, op.b, type,
                            static_cast<int>(op.n), op.a, type, static_cast<int>(op.k), &beta,
                            op.c, type, static_cast<int>(op.n), CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

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

struct Shape {
  int64_t m, n, k;
};

struct Timing {
  std::string shape, name;
  double median_us = 0, spread = 0, min_us = 0, tflops = 0;
};

std::string ShapeText(const Shape& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%ldx%ldx%ld", static_cast<long>(s.m), static_cast<long>(s.n),
                static_cast<long>(s.k));
  return buf;
}

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
      shapes.clear();
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) {
        long m, n, kk;
        if (std::sscanf(tok, "%ldx%ldx%ld", &m, &n, &kk) == 3) shapes.push_back({m, n, kk});
      }
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--shapes MxNxK,...]\n", argv[0]);
      return 2;
    }
  }

  int device = 0, driver = 0, runtime = 0, cublas_version = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp props{};
  CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CUBLAS_CHECK(cublasCreate(&g_ctx.cublas));
  CUBLAS_CHECK(cublasGetVersion(g_ctx.cublas, &cublas_version));
  g_ctx.sm_count = props.multiProcessorCount;
  std::printf("device: %s, sm_%d%d, %d SMs, L2 %d MB, driver %d, runtime %d, cuBLAS %d\n",
              props.name, props.major, props.minor, props.multiProcessorCount,
              props.l2CacheSize >> 20, driver, runtime, cublas_version);

  size_t max_a = 0, max_b = 0, max_c = 0;
  for (const Shape& s : shapes) {
    max_a = std::max<size_t>(max_a, s.m * s.k);
    max_b = std::max<size_t>(max_b, s.k * s.n);
    max_c = std::max<size_t>(max_c, s.m * s.n);
  }
  void *a, *b, *c;
  double* ref;
  CheckResult* check;
  unsigned long long* max_ref_bits;
  CUDA_CHECK(cudaMalloc(&a, max_a * 4));
  CUDA_CHECK(cudaMalloc(&b, max_b * 4));
  CUDA_CHECK(cudaMalloc(&c, max_c * 4 + kGuardBytes));
  CUDA_CHECK(cudaMalloc(&ref, max_c * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&check, sizeof(CheckResult)));
  CUDA_CHECK(cudaMalloc(&max_ref_bits, sizeof(unsigned long long)));
  const size_t flush_bytes = 2 * static_cast<size_t>(props.l2CacheSize);
  void* flush;
  CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));

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
        const dim3 grid((s.n + 15) / 16, (s.m + 15) / 16);
        ReferenceKernel<T><<<grid, dim3(16, 16), 0, stream>>>(
            static_cast<const T*>(a), static_cast<const T*>(b), ref, s.m, s.n, s.k);
      });
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaMemsetAsync(max_ref_bits, 0, sizeof(unsigned long long), stream));
      MaxAbsKernel<<<256, 256, 0, stream>>>(ref, mn, max_ref_bits);
      CUDA_CHECK(cudaGetLastError());
      unsigned long long bits = 0;
      CUDA_CHECK(cudaMemcpyAsync(&bits, max_ref_bits, sizeof bits, cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      double max_ref;
      std::memcpy(&max_ref, &bits, sizeof max_ref);

      const Op op{dtype, a, b, c, s.m, s.n, s.k};
      for (const Candidate& cand : candidates) {
        if (std::find(cand.dtypes.begin(), cand.dtypes.end(), dtype) == cand.dtypes.end()) continue;
        if (s.m > cand.max_m) continue;
        CUDA_CHECK(cudaMemsetAsync(c, 0xff, mn * es + kGuardBytes, stream));
        cand.run(op, stream);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemsetAsync(check, 0, sizeof(CheckResult), stream));
        CUDA_CHECK(cudaMemsetAsync(&check->first_bad, 0xff, sizeof(unsigned long long), stream));
        const double rel = std::fabs(cand.rel);
        const double fixed_tol = cand.abs + rel * std::sqrt(static_cast<double>(s.k)) * max_ref;
        ForDtype(dtype, [&](auto tag) {
          using T = decltype(tag);
          CheckKernel<T><<<512, 256, 0, stream>>>(
              static_cast<const T*>(c), ref, mn, fixed_tol, UnitRoundoff(dtype),
              static_cast<const unsigned char*>(c) + mn * es, kGuardBytes, check);
        });
        CUDA_CHECK(cudaGetLastError());
        CheckResult r;
        CUDA_CHECK(cudaMemcpyAsync(&r, check, sizeof r, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        double max_err, max_excess;
        std::memcpy(&max_err, &r.max_err_bits, sizeof max_err);
        std::memcpy(&max_excess, &r.max_excess_bits, sizeof max_excess);
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
          CUDA_CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, stream));
          CUDA_CHECK(cudaEventRecord(start, stream));
          cand.run(op, stream);
          CUDA_CHECK(cudaEventRecord(stop, stream));
          CUDA_CHECK(cudaEventSynchronize(stop));
          float ms = 0;
          CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
          samples.push_back(ms * 1e3);
        }
        CUDA_CHECK(cudaGetLastError());
        Timing t;
        t.shape = ShapeText(s);
        t.name = cand.name;
        t.median_us = Percentile(samples, 0.5);
        t.spread = (Percentile(samples, 0.75) - Percentile(samples, 0.25)) / t.median_us;
        t.min_us = *std::min_element(samples.begin(), samples.end());
        t.tflops = 2.0 * s.m * s.n * s.k / (t.median_us * 1e-6) / 1e12;
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
      if (u.shape == t.shape && u.name == "cublasGemmEx") cublas_us = u.median_us;
    }
    std::printf("| %s | %s | %.1f | %.1f%% | %.1f | %.1f | %.2fx |\n", t.shape.c_str(),
                t.name.c_str(), t.median_us, 100 * t.spread, t.min_us, t.tflops,
                cublas_us > 0 ? cublas_us / t.median_us : 0.0);
  }
  std::printf("\n%s: %d correctness failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
