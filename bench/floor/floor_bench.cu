// floor_bench: where a small bandwidth-bound GEMM's time goes on the device
// (issue 12). Every candidate of every design takes 8.7-11.7 us at 2-4 MiB of
// operands on the H200 (0.5-1 us of bytes) and 16-18 us at 32 MiB (7.8 us), so
// this times the same launches under several ways of emptying the L2 before a
// sample, next to kernels that do nothing or only read the operands:
//
//   memset           the benches' flush: memset of 2x L2, start event queued behind it
//   memset+sync      the daemon's Measurer (CudaStream::FlushCache, Synchronize,
//                    TimerStart): memset of zeros, the host waits, then events and
//                    launch are enqueued on an idle GPU (host launch latency inside)
//   memset+spin      memset, then a 20 us one-thread spin kernel: any write-back the
//                    memset left in flight drains before the start event
//   memset+sync+spin memset, host wait, 30 us spin (the launch queued again)
//   memset+touch     memset, then one 16-byte read per 64 KiB of A and B: the
//                    operands' pages translated (TLB warm), almost none of their lines in L2
//   read             a read pass of 2x L2 (clean lines), start queued behind it
//   rotate+spin      no flush: each sample reads the next of enough operand copies
//                    (>= 3x L2 in all) that its own left the L2 long ago; the L2
//                    holds other GEMMs' clean operands and small dirty outputs
//   hot+spin         an untimed run of the same launch just before: operands in L2
//                    where they fit (the other bound)
//
// Candidates: events only (nothing between them), an empty kernel 1x32, an
// empty kernel of splitk_tiny's geometry (128 CTAs of 256 threads, clusters of
// 8, 34 KiB of shared memory), reads of A and B (4 CTAs an SM with one 16-byte
// load in flight a thread; 1 CTA of 1024 threads an SM with 4), splitk_tiny,
// cublasGemmEx, skinny and skinny_wide, mid_stream's configs (where they take the shape).
//
// Correctness first (--check 1): the GEMM candidates against an f64 device
// reference on NaN-poisoned C plus guard (cuBLAS over budget is a WARN).
// Timing: CUDA events around the launch(es) alone, after warm-up; samples
// interleaved (sample r of every variant and candidate before sample r + 1);
// median, IQR/median, min of --reps samples. Floor = bytes (A, B, C once) /
// --bandwidth. --out DIR writes every sample to DIR/floor_samples.csv.
//
// usage: floor_bench [--reps N] [--shapes MxNxK,...] [--candidates a,b]
//                    [--variants a,b] [--check 0|1] [--bandwidth TB/s] [--out DIR]

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "engine/dtype.h"
#include "kernels/mid_stream/mid_stream.h"
#include "kernels/skinny/skinny_stream.h"
#include "kernels/splitk/splitk.h"
#include "kernels/splitk_tiny/splitk_tiny.h"

#ifndef ARBITER_BENCH_COMMIT
#define ARBITER_BENCH_COMMIT "unknown"
#endif

namespace {

using arbiter::DType;
using arbiter::UnitRoundoff;
namespace k = arbiter::kernels;
namespace gc = arbiter::gemm_check;
using T = __nv_bfloat16;

__global__ void EmptyKernel() {}

// One thread waits `ns` by the global timer (independent of the SM clock).
__global__ void SpinKernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// One 16-byte read per 64 KiB: every page of the operands translated, 1/4096
// of their bytes in L2.
__global__ void TouchKernel(const uint4* __restrict__ p, int64_t count, unsigned* sink) {
  unsigned x = 0;
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 4096; i < count;
       i += int64_t{gridDim.x} * blockDim.x * 4096) {
    const uint4 v = __ldcg(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) sink[0] = x;
}

// Reads A then B (one contiguous run each) with kLoads independent 16-byte
// loads in flight per thread, L1 bypassed; computes nothing. The xor goes to
// `sink` only when (practically) impossible.
template <int kLoads>
__global__ void ReadKernel(const uint4* __restrict__ a, int64_t a_count, const uint4* __restrict__ b,
                           int64_t b_count, unsigned* sink) {
  unsigned x = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t total = a_count + b_count;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += kLoads * stride) {
    uint4 v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t j = i + u * stride;
      v[u] = j < a_count ? __ldcg(a + j) : j < total ? __ldcg(b + (j - a_count)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (x == 0x9e3779b9u) sink[0] = x;
}

enum Variant { kMemset, kMemsetSync, kMemsetSpin, kMemsetSyncSpin, kMemsetTouch, kRead, kRotate, kHot, kVariants };
const char* const kVariantNames[kVariants] = {"memset",       "memset+sync", "memset+spin",
                                              "memset+sync+spin", "memset+touch", "read",
                                              "rotate+spin",  "hot+spin"};

struct Candidate {
  std::string name;
  std::function<bool(const gc::Shape&)> takes;
  std::function<cudaError_t(const gc::Op&, cudaStream_t)> run;  // the launch's status
  bool gemm = false;  // writes C: checked against the reference
};

// A family's launch through its Launcher; its error (nothing launched) is returned.
cudaError_t Family(const k::Launcher& launcher, const gc::Op& op, int sms, gc::Scratch& scratch, cudaStream_t s) {
  k::LaunchArgs args = gc::Args(op.dtype, op.a, op.b, op.c, op.m, op.n, op.k, sms);
  return gc::Launch(launcher, args, scratch, s);
}

// The operands of one shape: `copies` (A, B) pairs back to back, C once.
struct Operands {
  gc::Shape s;
  int copies = 1;
  T* ab = nullptr;
  T* c = nullptr;
  size_t a_elems() const { return s.m * s.k; }
  size_t pair_elems() const { return s.m * s.k + s.k * s.n; }
  gc::Op Op(int copy) const {
    const T* a = ab + (copy % copies) * pair_elems();
    return gc::Op{DType::kBF16, a, a + a_elems(), c, s.m, s.n, s.k};
  }
};

bool Listed(const std::string& list, const std::string& name) {
  if (list.empty()) return true;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t end = std::min(list.find(',', pos), list.size());
    if (list.compare(pos, end - pos, name) == 0) return true;
    pos = end + 1;
  }
  return false;
}

double FloorUs(const gc::Shape& s, double tbs) {
  return 2.0 * (s.m * s.k + s.k * s.n + s.m * s.n) / (tbs * 1e12) * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 40, check = 1;
  double bandwidth = 4.3;
  std::string cand_list, variant_list, out_dir;
  char default_shapes[] = "16x16x65536,64x64x8192,1x4096x4096,16x4096x4096,1x14336x4096";
  char* shapes_arg = default_shapes;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else if (flag == "--shapes") shapes_arg = argv[i + 1];
    else if (flag == "--candidates") cand_list = argv[i + 1];
    else if (flag == "--variants") variant_list = argv[i + 1];
    else if (flag == "--check") check = std::atoi(argv[i + 1]);
    else if (flag == "--bandwidth") bandwidth = std::atof(argv[i + 1]);
    else if (flag == "--out") out_dir = argv[i + 1];
  }
  const std::vector<gc::Shape> shapes = gc::ParseShapes(shapes_arg);
  cublasHandle_t cublas = nullptr;
  const gc::Device device = gc::OpenDevice(&cublas);
  const int sms = device.props.multiProcessorCount;
  const size_t l2 = device.props.l2CacheSize;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  gc::Scratch scratch;
  unsigned* sink = nullptr;
  CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned)));
  gc::Checker checker;
  const gc::L2Flush flush(device.props);
  void* zero_flush = nullptr;  // the Measurer's own buffer and byte (0)
  CUDA_CHECK(cudaMalloc(&zero_flush, 2 * l2));
  gc::EventTimer timer;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%FT%TZ", std::gmtime(&now));
  std::printf("floor_bench at %s, %s; %s; %d reps\n", ARBITER_BENCH_COMMIT, date, device.Describe().c_str(), reps);

  const k::SplitKTinyPlan tiny_geometry = k::MakeSplitKTinyPlan(65536, sms);
  auto all = [](const gc::Shape&) { return true; };
  auto rows64 = [](const gc::Shape& s) { return s.m <= 64; };
  std::vector<Candidate> cands = {
      {"events only", all, [](const gc::Op&, cudaStream_t) { return cudaSuccess; }},
      {"empty 1x32", all,
       [](const gc::Op&, cudaStream_t s) {
         EmptyKernel<<<1, 32, 0, s>>>();
         return cudaGetLastError();
       }},
      {"empty tiny-grid", all,
       [&](const gc::Op&, cudaStream_t s) {
         cudaLaunchConfig_t config = {};
         config.gridDim = dim3(tiny_geometry.ctas);
         config.blockDim = dim3(256);
         config.dynamicSmemBytes = 34 << 10;
         config.stream = s;
         cudaLaunchAttribute attr = {};
         attr.id = cudaLaunchAttributeClusterDimension;
         attr.val.clusterDim = {static_cast<unsigned>(tiny_geometry.cluster), 1, 1};
         config.attrs = &attr;
         config.numAttrs = 1;
         return cudaLaunchKernelEx(&config, EmptyKernel);
       }},
      {"read 4/SM x1", all,
       [&](const gc::Op& op, cudaStream_t s) {
         ReadKernel<1><<<4 * sms, 256, 0, s>>>(static_cast<const uint4*>(op.a), op.m * op.k / 8,
                                               static_cast<const uint4*>(op.b), op.k * op.n / 8, sink);
         return cudaGetLastError();
       }},
      {"read 1/SM x4", all,
       [&](const gc::Op& op, cudaStream_t s) {
         ReadKernel<4><<<sms, 1024, 0, s>>>(static_cast<const uint4*>(op.a), op.m * op.k / 8,
                                            static_cast<const uint4*>(op.b), op.k * op.n / 8, sink);
         return cudaGetLastError();
       }},
      {"splitk_tiny", [](const gc::Shape& s) { return s.m <= 64 && s.n <= 64; },
       [&](const gc::Op& op, cudaStream_t s) { return Family(k::kSplitKTiny, op, sms, scratch, s); }, true},
      {"cublasGemmEx", all,
       [&](const gc::Op& op, cudaStream_t s) {
         gc::RowMajorGemmEx(cublas, op, s);
         return cudaGetLastError();
       },
       true},
      {"skinny", rows64, [&](const gc::Op& op, cudaStream_t s) { return Family(k::kSkinnyStream, op, sms, scratch, s); },
       true},
      {"skinny_wide", [](const gc::Shape& s) { return s.m <= 64 && s.n % 8 == 0; },
       [&](const gc::Op& op, cudaStream_t s) { return Family(k::kSkinnyStreamWideLauncher, op, sms, scratch, s); },
       true},
  };
  // mid_stream's configs (17-128 rows; 512-column strips to 64).
  for (const k::MidStreamConfig& config : k::kMidStreamConfigs) {
    cands.push_back({std::string("mid_stream_") + config.name,
                     [config](const gc::Shape& s) { return s.m <= (config.columns == 512 ? 64 : 128); },
                     [&, config](const gc::Op& op, cudaStream_t s) {
                       k::LaunchArgs args = gc::Args(op.dtype, op.a, op.b, op.c, op.m, op.n, op.k, sms);
                       args.workspace_bytes = k::MidStreamWorkspaceBytes(args, config);
                       args.workspace = scratch.Get(args.workspace_bytes);
                       return k::LaunchMidStream(args, config, s);
                     },
                     true});
  }
  cands.erase(std::remove_if(cands.begin(), cands.end(), [&](const Candidate& c) { return !Listed(cand_list, c.name); }),
              cands.end());
  std::vector<int> variants;
  for (int v = 0; v < kVariants; ++v) {
    if (Listed(variant_list, kVariantNames[v])) variants.push_back(v);
  }

  FILE* csv = nullptr;
  if (!out_dir.empty()) {
    csv = std::fopen((out_dir + "/floor_samples.csv").c_str(), "w");
    if (csv) std::fprintf(csv, "shape,variant,candidate,sample,us\n");
  }
  int failures = 0;
  // summaries[shape][variant][candidate]
  std::vector<std::vector<std::vector<gc::Summary>>> table;
  for (const gc::Shape& s : shapes) {
    Operands ops;
    ops.s = s;
    const size_t pair_bytes = ops.pair_elems() * sizeof(T);
    ops.copies = std::max<int>(2, static_cast<int>((3 * l2 + pair_bytes - 1) / pair_bytes));
    CUDA_CHECK(cudaMalloc(&ops.ab, ops.copies * pair_bytes));
    CUDA_CHECK(cudaMalloc(&ops.c, s.m * s.n * sizeof(T) + gc::kGuardBytes));
    gc::FillKernel<T><<<1024, 256, 0, stream>>>(ops.ab, ops.copies * ops.pair_elems(), 7 + s.k);
    CUDA_CHECK(cudaGetLastError());
    const gc::Op op0 = ops.Op(0);
    // Which candidates take this shape: a launch that fails launches nothing.
    std::vector<bool> live(cands.size());
    for (size_t ci = 0; ci < cands.size(); ++ci) {
      live[ci] = cands[ci].takes(s);
      if (!live[ci]) continue;
      const cudaError_t err = cands[ci].run(op0, stream);
      if (err != cudaSuccess) {
        live[ci] = false;
        std::printf("SKIP %-14s %-13s %s\n", gc::ShapeText(s).c_str(), cands[ci].name.c_str(), cudaGetErrorName(err));
      }
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (check) {
      double* ref;
      CUDA_CHECK(cudaMalloc(&ref, s.m * s.n * sizeof(double)));
      gc::LaunchReference<T>(static_cast<const T*>(op0.a), static_cast<const T*>(op0.b), nullptr, s.m, ref, s.n, s.k,
                             stream);
      const double max_ref = checker.MaxAbs(ref, s.m * s.n, stream);
      const double tol = k::kSplitKBudgetAbs + k::kSplitKBudgetRel * std::sqrt(double(s.k)) * max_ref;
      for (size_t ci = 0; ci < cands.size(); ++ci) {
        const Candidate& cand = cands[ci];
        if (!cand.gemm || !live[ci]) continue;
        gc::Checker::Poison(ops.c, s.m, s.n, sizeof(T), stream);
        CUDA_CHECK(cand.run(op0, stream));
        const gc::CheckResult r =
            checker.Check<T>(ops.c, s.m, s.n, nullptr, s.m, ref, tol, UnitRoundoff(DType::kBF16), stream);
        const bool ok = r.nonfinite == 0 && r.out_of_budget == 0 && r.guard_touched == 0;
        const bool warn_only = !ok && cand.name == "cublasGemmEx" && r.nonfinite == 0 && r.guard_touched == 0;
        if (!ok && !warn_only) ++failures;
        std::printf("%-4s %-14s %-13s max|err| %.3g (budget %.3g + u|ref|), %llu non-finite, %llu over, guard %llu\n",
                    ok ? "ok" : warn_only ? "WARN" : "FAIL", gc::ShapeText(s).c_str(), cand.name.c_str(),
                    gc::FromBits(r.max_err_bits), tol, r.nonfinite, r.out_of_budget, r.guard_touched);
      }
      CUDA_CHECK(cudaFree(ref));
    }
    for (size_t ci = 0; ci < cands.size(); ++ci) {
      for (int i = 0; live[ci] && i < 3; ++i) CUDA_CHECK(cands[ci].run(op0, stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<std::vector<std::vector<double>>> samples(kVariants, std::vector<std::vector<double>>(cands.size()));
    int rotation = 1;
    for (int r = 0; r < reps; ++r) {
      for (int v : variants) {
        for (size_t ci = 0; ci < cands.size(); ++ci) {
          const Candidate& cand = cands[ci];
          if (!live[ci]) continue;
          gc::Op op = op0;
          switch (v) {
            case kMemset: flush.Write(r, stream); break;
            case kMemsetSync:
              CUDA_CHECK(cudaMemsetAsync(zero_flush, 0, 2 * l2, stream));
              CUDA_CHECK(cudaStreamSynchronize(stream));
              break;
            case kMemsetSpin:
              flush.Write(r, stream);
              SpinKernel<<<1, 1, 0, stream>>>(20000);
              break;
            case kMemsetSyncSpin:
              flush.Write(r, stream);
              CUDA_CHECK(cudaStreamSynchronize(stream));
              SpinKernel<<<1, 1, 0, stream>>>(30000);
              break;
            case kMemsetTouch:
              flush.Write(r, stream);
              TouchKernel<<<8, 128, 0, stream>>>(static_cast<const uint4*>(op0.a), ops.pair_elems() / 8, sink);
              break;
            case kRead: flush.Read(stream); break;
            case kRotate:
              op = ops.Op(rotation++);
              SpinKernel<<<1, 1, 0, stream>>>(30000);
              break;
            case kHot:
              CUDA_CHECK(cand.run(op0, stream));
              SpinKernel<<<1, 1, 0, stream>>>(30000);
              break;
          }
          CUDA_CHECK(cudaGetLastError());
          const double us = timer.Us(stream, [&] { CUDA_CHECK(cand.run(op, stream)); });
          CUDA_CHECK(cudaGetLastError());
          samples[v][ci].push_back(us);
          if (csv) std::fprintf(csv, "%s,%s,%s,%d,%.3f\n", gc::ShapeText(s).c_str(), kVariantNames[v], cand.name.c_str(), r, us);
        }
      }
    }
    std::vector<std::vector<gc::Summary>> row(kVariants, std::vector<gc::Summary>(cands.size()));
    for (int v : variants) {
      for (size_t ci = 0; ci < cands.size(); ++ci) {
        if (!samples[v][ci].empty()) row[v][ci] = gc::Summarize(samples[v][ci]);
      }
    }
    table.push_back(row);
    CUDA_CHECK(cudaFree(ops.ab));
    CUDA_CHECK(cudaFree(ops.c));
  }
  if (csv) std::fclose(csv);

  for (size_t si = 0; si < shapes.size(); ++si) {
    std::printf("\n## %s bf16: floor %.2f us; median us (IQR/median) of %d samples\n\n| candidate |",
                gc::ShapeText(shapes[si]).c_str(), FloorUs(shapes[si], bandwidth), reps);
    for (int v : variants) std::printf(" %s |", kVariantNames[v]);
    std::printf("\n|---|");
    for (size_t i = 0; i < variants.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (size_t ci = 0; ci < cands.size(); ++ci) {
      if (table[si][variants[0]][ci].median == 0) continue;  // not run at this shape
      std::printf("| %s |", cands[ci].name.c_str());
      for (int v : variants) {
        const gc::Summary& x = table[si][v][ci];
        std::printf(" %.2f (%.0f%%) |", x.median, 100 * x.spread);
      }
      std::printf("\n");
    }
  }
  std::printf("\n%s\n", failures == 0 ? "all checks passed" : "CHECKS FAILED");
  return failures == 0 ? 0 : 1;
}
