// splitk_tiny_bench: correctness, then device time, of splitk_tiny
// (kernels/splitk_tiny/splitk_tiny.h) next to splitk, cublasGemmEx and
// cuBLASLt's first heuristic answer, for a tiny C against a long K, in one
// process on one device; "splitk_tiny cN" are its plans with clusters of at
// most N CTAs, "@64" its plans for 64 SMs (fewer, longer K slices), timed for
// comparison, "read A+B (floor)" a kernel that only reads the operands once,
// and "tiny to CTA sum" / "tiny to cluster sum" splitk_tiny's kernel cut short
// (LaunchSplitKTinyProbe), which split its time after the loads.
//
// Correctness first, at every shape: random operands in [-1, 1) (never
// zeros), an f64 device reference over the operands as stored, C and a guard
// past it poisoned with NaN before every run; every element must be written,
// finite and within the candidate's budget (cuBLAS: splitk's), the guard
// untouched; splitk_tiny must also repeat bitwise (a second run's C equal to
// the first's). A failure prints FAIL and makes the exit status 1, and that
// candidate is not timed.
//
// Timing, as bench/transformer/transformer_bench.cu does: CUDA events around
// the launch(es) alone (splitk's reduce launch included), after warm-up; L2
// emptied before every sample, by the daemon's memset of twice its size and, in
// a second pass, by a read of it; candidates interleaved sample by sample so
// clock drift lands on all alike; median, IQR/median and min of --reps
// samples. An empty kernel under the same events and flushes is the launch
// floor. Floor = bytes (A, B, C once) / --bandwidth (default 4.3 TB/s).
//
// usage: splitk_tiny_bench [--reps N] [--shapes MxNxK,...] [--bandwidth TB/s]

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "engine/dtype.h"
#include "kernels/splitk/splitk.h"
#include "kernels/splitk_tiny/splitk_tiny.h"

#ifndef ARBITER_BENCH_COMMIT
#define ARBITER_BENCH_COMMIT "unknown"
#endif

namespace {

using arbiter::DType;
using arbiter::ElementSize;
using arbiter::UnitRoundoff;
namespace k = arbiter::kernels;
namespace gc = arbiter::gemm_check;

__global__ void EmptyKernel() {}

// Reads A and B once (16-byte loads, L1 bypassed, 4 CTAs an SM) and computes
// nothing: what the operands' bytes alone cost after the flush, launch
// included, so a candidate's time splits into the bytes and the rest. The
// xor goes to `sink` only when (practically) impossible.
__global__ void ReadOperandsKernel(const uint4* __restrict__ a, int64_t a_count,
                                   const uint4* __restrict__ b, int64_t b_count, unsigned* sink) {
  unsigned x = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < a_count + b_count; i += stride) {
    const uint4 v = i < a_count ? __ldcg(a + i) : __ldcg(b + (i - a_count));
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) sink[0] = x;
}

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 64ull << 20;  // the daemon's per-stream cuBLASLt workspace
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  // cuBLASLt's first heuristic answer for row-major C = A B as C^T = B^T A^T.
  void Plan(const gc::Op& op) {
    if (matmul != nullptr) {
      cublasLtMatmulDescDestroy(matmul);
      cublasLtMatrixLayoutDestroy(a);
      cublasLtMatrixLayoutDestroy(b);
      cublasLtMatrixLayoutDestroy(c);
    }
    const cudaDataType_t t = gc::CudaType(op.dtype);
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, t, op.n, op.k, op.n));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, t, op.k, op.m, op.k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, t, op.n, op.m, op.n));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes)));
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, matmul, a, b, c, c, pref, 1, &result, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found < 1) {
      std::fprintf(stderr, "cuBLASLt: no algorithm\n");
      std::exit(2);
    }
    algo = result.algo;
  }
  void Run(const gc::Op& op, cudaStream_t s) const {
    const float alpha = 1.f, beta = 0.f;
    CUBLAS_CHECK(cublasLtMatmul(handle, matmul, &alpha, op.b, a, op.a, b, &beta, op.c, c, op.c, c,
                                &algo, workspace, workspace_bytes, s));
  }
};

struct Candidate {
  std::string name;
  std::function<void(const gc::Op&, cudaStream_t)> run;
  bool ok = true;
  bool computes = true;  // false: a floor that writes no C (timed, not checked)
  int max_mn = 1 << 30;  // timed only where M and N are at most this
};

struct Timing {
  gc::Summary memset_flush, read_flush;
};

double FloorUs(const gc::Shape& s, double bandwidth_tbs) {
  const double bytes = 2.0 * (s.m * s.k + s.k * s.n + s.m * s.n);
  return bytes / (bandwidth_tbs * 1e12) * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  double bandwidth = 4.3;
  char default_shapes[] = "16x16x65536,16x16x32776,16x64x16384,64x64x8192";
  char* shapes_arg = default_shapes;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--shapes")) shapes_arg = argv[i + 1];
    else if (!std::strcmp(argv[i], "--bandwidth")) bandwidth = std::atof(argv[i + 1]);
  }
  const std::vector<gc::Shape> shapes = gc::ParseShapes(shapes_arg);
  cublasHandle_t cublas = nullptr;
  const gc::Device device = gc::OpenDevice(&cublas);
  const int sm_count = device.props.multiProcessorCount;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Lt lt;
  CUBLAS_CHECK(cublasLtCreate(&lt.handle));
  CUDA_CHECK(cudaMalloc(&lt.workspace, lt.workspace_bytes));
  gc::Scratch scratch;
  unsigned* sink = nullptr;
  CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned)));
  gc::Checker checker;
  const gc::L2Flush flush(device.props);
  gc::EventTimer timer;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%FT%TZ", std::gmtime(&now));
  std::printf("splitk_tiny_bench at %s, %s; %s; %d reps\n", ARBITER_BENCH_COMMIT, date,
              device.Describe().c_str(), reps);

  // splitk_tiny with its plan capped at `max_cluster` CTAs a cluster, planned for `sms` SMs.
  const auto tiny_plan = [&](int max_cluster, int sms) {
    return [&, max_cluster, sms](const gc::Op& op, cudaStream_t s) {
      k::LaunchArgs args = gc::Args(op.dtype, op.a, op.b, op.c, op.m, op.n, op.k, sms);
      const k::SplitKTinyPlan plan = k::MakeSplitKTinyPlan(op.k, sms, max_cluster);
      args.workspace_bytes = k::SplitKTinyWorkspaceBytes(args, plan);
      args.workspace = scratch.Get(args.workspace_bytes);
      CUDA_CHECK(k::LaunchSplitKTiny(args, plan, s));
    };
  };
  // splitk_tiny's kernel changed for the breakdown (bf16, M, N <= 16).
  const auto probe = [&](k::SplitKTinyProbe which) {
    return [&, which](const gc::Op& op, cudaStream_t s) {
      k::LaunchArgs args = gc::Args(op.dtype, op.a, op.b, op.c, op.m, op.n, op.k, sm_count);
      args.workspace_bytes = k::SplitKTinyWorkspaceBytes(args);
      args.workspace = scratch.Get(args.workspace_bytes);
      CUDA_CHECK(k::LaunchSplitKTinyProbe(args, which, s));
    };
  };
  std::vector<Candidate> cands = {
      {"splitk_tiny", [&](const gc::Op& op, cudaStream_t s) { gc::RunFamily(k::kSplitKTiny, op, sm_count, scratch, s); }},
      {"splitk", [&](const gc::Op& op, cudaStream_t s) { gc::RunFamily(k::kSplitK, op, sm_count, scratch, s); }},
      {"cublasGemmEx", [&](const gc::Op& op, cudaStream_t s) { gc::RowMajorGemmEx(cublas, op, s); }},
      {"cublasLt_h0", [&](const gc::Op& op, cudaStream_t s) { lt.Run(op, s); }},
      // Smaller clusters: more slabs for the last cluster to add, fewer ranks to wait for.
      {"splitk_tiny c4", tiny_plan(4, sm_count)},
      {"splitk_tiny c2", tiny_plan(2, sm_count)},
      {"splitk_tiny c1", tiny_plan(1, sm_count)},
      // The plan for fewer SMs: fewer, longer K slices (fewer clusters to add).
      {"splitk_tiny@64", [&](const gc::Op& op, cudaStream_t s) { gc::RunFamily(k::kSplitKTiny, op, 64, scratch, s); }},
      {"read A+B (floor)",
       [&](const gc::Op& op, cudaStream_t s) {
         ReadOperandsKernel<<<4 * sm_count, 256, 0, s>>>(
             static_cast<const uint4*>(op.a), op.m * op.k * 2 / 16, static_cast<const uint4*>(op.b),
             op.k * op.n * 2 / 16, sink);
       },
       true, false},
      // splitk_tiny cut short (bf16, M, N <= 16): where its time goes after the loads.
      {"tiny to CTA sum", probe(k::SplitKTinyProbe::kStopAfterCtaSum), true, false, 16},
      {"tiny to cluster sum", probe(k::SplitKTinyProbe::kStopAfterClusterSum), true, false, 16},
  };
  size_t cublas_index = 0;
  while (cands[cublas_index].name != "cublasGemmEx") ++cublas_index;

  // The launch floor: an empty kernel under the same events and flushes.
  std::vector<double> empty_w, empty_r;
  for (int r = 0; r < reps; ++r) {
    flush.Write(r, stream);
    empty_w.push_back(timer.Us(stream, [&] { EmptyKernel<<<1, 32, 0, stream>>>(); }));
    flush.Read(stream);
    empty_r.push_back(timer.Us(stream, [&] { EmptyKernel<<<1, 32, 0, stream>>>(); }));
  }
  const gc::Summary floor_w = gc::Summarize(empty_w), floor_r = gc::Summarize(empty_r);
  std::printf("launch floor: an empty kernel, median %.2f us after the memset flush, %.2f us after the read flush\n",
              floor_w.median, floor_r.median);

  int failures = 0;
  std::vector<std::vector<Timing>> table;
  const DType dtype = DType::kBF16;
  using T = __nv_bfloat16;
  for (const gc::Shape& s : shapes) {
    T *a, *b, *c;
    double* ref;
    CUDA_CHECK(cudaMalloc(&a, s.m * s.k * sizeof(T)));
    CUDA_CHECK(cudaMalloc(&b, s.k * s.n * sizeof(T)));
    CUDA_CHECK(cudaMalloc(&c, s.m * s.n * sizeof(T) + gc::kGuardBytes));
    CUDA_CHECK(cudaMalloc(&ref, s.m * s.n * sizeof(double)));
    gc::FillKernel<T><<<1024, 256, 0, stream>>>(a, s.m * s.k, 11 + s.k);
    gc::FillKernel<T><<<1024, 256, 0, stream>>>(b, s.k * s.n, 17 + s.k);
    gc::LaunchReference<T>(a, b, nullptr, s.m, ref, s.n, s.k, stream);
    const double max_ref = checker.MaxAbs(ref, s.m * s.n, stream);
    const gc::Op op{dtype, a, b, c, s.m, s.n, s.k};
    lt.Plan(op);
    // splitk's budget for every candidate (splitk_tiny's is the same).
    const double fixed_tol = k::kSplitKBudgetAbs + k::kSplitKBudgetRel * std::sqrt(double(s.k)) * max_ref;
    std::vector<uint8_t> first(s.m * s.n * sizeof(T)), again(first.size());
    const auto applies = [&](const Candidate& cand) { return s.m <= cand.max_mn && s.n <= cand.max_mn; };
    for (Candidate& cand : cands) {
      if (!cand.computes || !applies(cand)) continue;
      gc::Checker::Poison(c, s.m, s.n, sizeof(T), stream);
      cand.run(op, stream);
      CUDA_CHECK(cudaGetLastError());
      const gc::CheckResult r = checker.Check<T>(c, s.m, s.n, nullptr, s.m, ref, fixed_tol, UnitRoundoff(dtype), stream);
      cand.ok = r.nonfinite == 0 && r.out_of_budget == 0 && r.guard_touched == 0;
      bool repeats = true;
      const bool tiny = cand.name.rfind("splitk_tiny", 0) == 0;
      if (tiny) {
        CUDA_CHECK(cudaMemcpy(first.data(), c, first.size(), cudaMemcpyDeviceToHost));
        for (int i = 0; i < 3; ++i) {
          flush.Write(i, stream);  // other work between the runs, as in the daemon
          gc::Checker::Poison(c, s.m, s.n, sizeof(T), stream);
          cand.run(op, stream);
          CUDA_CHECK(cudaMemcpyAsync(again.data(), c, again.size(), cudaMemcpyDeviceToHost, stream));
          CUDA_CHECK(cudaStreamSynchronize(stream));
          repeats = repeats && first == again;
        }
        cand.ok = cand.ok && repeats;
      }
      if (!cand.ok) ++failures;
      std::printf("%-4s %-16s %-19s max|err| %.3g (budget %.3g + u|ref|), %llu non-finite, %llu over, guard %llu%s\n",
                  cand.ok ? "ok" : "FAIL", gc::ShapeText(s).c_str(), cand.name.c_str(),
                  gc::FromBits(r.max_err_bits), fixed_tol, r.nonfinite, r.out_of_budget,
                  r.guard_touched, tiny ? (repeats ? ", 3 repeats bitwise equal" : ", REPEATS DIFFER") : "");
    }
    // Warm-up, then interleaved samples under both flushes.
    for (Candidate& cand : cands) {
      if (!applies(cand)) continue;
      for (int i = 0; i < 3; ++i) cand.run(op, stream);
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<std::vector<double>> w(cands.size()), rd(cands.size());
    for (int r = 0; r < reps; ++r) {
      for (size_t i = 0; i < cands.size(); ++i) {
        if (!cands[i].ok || !applies(cands[i])) continue;
        flush.Write(r, stream);
        w[i].push_back(timer.Us(stream, [&] { cands[i].run(op, stream); }));
        flush.Read(stream);
        rd[i].push_back(timer.Us(stream, [&] { cands[i].run(op, stream); }));
      }
    }
    std::vector<Timing> row(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      if (!cands[i].ok || !applies(cands[i])) continue;
      row[i] = {gc::Summarize(w[i]), gc::Summarize(rd[i])};
    }
    table.push_back(row);
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
    CUDA_CHECK(cudaFree(c));
    CUDA_CHECK(cudaFree(ref));
  }

  std::printf("\n## bf16, median us of %d samples (IQR/median, min) after the daemon's memset flush | after a read flush; "
              "launch floor %.2f | %.2f us\n\n", reps, floor_w.median, floor_r.median);
  std::printf("| shape | floor us | candidate | median us | IQR | min | vs cublasGemmEx | read-flush us | IQR | vs cublasGemmEx |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t si = 0; si < shapes.size(); ++si) {
    const std::vector<Timing>& row = table[si];
    const Timing& ref_t = row[cublas_index];
    for (size_t i = 0; i < cands.size(); ++i) {
      if (shapes[si].m > cands[i].max_mn || shapes[si].n > cands[i].max_mn) continue;
      if (row[i].memset_flush.median == 0) {
        std::printf("| %s | | %s | failed | | | | | | |\n", gc::ShapeText(shapes[si]).c_str(), cands[i].name.c_str());
        continue;
      }
      std::printf("| %s | %.2f | %s | %.2f | %.1f%% | %.2f | %.2fx | %.2f | %.1f%% | %.2fx |\n",
                  gc::ShapeText(shapes[si]).c_str(), FloorUs(shapes[si], bandwidth), cands[i].name.c_str(),
                  row[i].memset_flush.median, 100 * row[i].memset_flush.spread, row[i].memset_flush.min,
                  ref_t.memset_flush.median / row[i].memset_flush.median, row[i].read_flush.median,
                  100 * row[i].read_flush.spread, ref_t.read_flush.median / row[i].read_flush.median);
    }
  }
  std::printf("\n%s\n", failures == 0 ? "all checks passed" : "CHECKS FAILED");
  return failures == 0 ? 0 : 1;
}
