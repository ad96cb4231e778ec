// transformer_bench's claims (claims.h): skinny's ragged paths, run-to-run
// repeats and batch invariance, and any candidate's own ragged shapes.
#include "bench/transformer/claims.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "bench/transformer/candidates.h"
#include "bench/transformer/problem.h"

namespace arbiter::transformer_bench {

namespace {

std::vector<uint16_t> Download(const void* c, size_t count) {
  std::vector<uint16_t> host(count);
  CUDA_CHECK(cudaMemcpy(host.data(), c, count * 2, cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace

// ---- skinny's own claims: ragged paths, run-to-run, batch invariance ----------------

int SkinnyClaims(const Candidate& skinny, cudaStream_t st, gc::Checker& checker) {
  int failures = 0;
  // Every member (M to 128), every load width (N % 8, % 4, % 2, odd), K % 4 and
  // K % 16 ragged, narrow N (workspace splits), cluster splits.
  const Shape ragged[] = {
      {1, 1, 1, DType::kBF16, false},       {3, 9, 127, DType::kF16, false},
      {5, 131, 257, DType::kBF16, false},   {8, 264, 1024, DType::kF16, false},
      {13, 333, 2049, DType::kBF16, false}, {16, 4100, 3000, DType::kF16, false},
      {17, 30522, 768, DType::kBF16, false}, {31, 32001, 512, DType::kF16, false},
      {32, 1030, 4095, DType::kBF16, false}, {24, 72, 1024, DType::kF16, false},
      {29, 4094, 777, DType::kBF16, false},  {32, 30522, 768, DType::kF16, false},
      {16, 16, 65536, DType::kBF16, false},  {2, 256000, 64, DType::kBF16, false},
      {1, 4096, 4096, DType::kF16, false},   {16, 14336, 4096, DType::kBF16, false}};
  uint64_t seed = 1000;
  for (const Shape& s : ragged) {
    Buffers buf;
    buf.s = s;
    Prepare(buf, seed += 7, checker, st);
    for (int shift = 0; shift < 2; ++shift) {
      // shift 1: A and B one element past their allocation's alignment (the
      // element-load paths), with operands copied there.
      Op op{s.dtype, buf.a, buf.b, buf.c, s.m, s.n, s.k};
      uint16_t *a1 = nullptr, *b1 = nullptr;
      if (shift) {
        CUDA_CHECK(cudaMalloc(&a1, (s.m * s.k + 8) * 2));
        CUDA_CHECK(cudaMalloc(&b1, (s.k * s.n + 8) * 2));
        CUDA_CHECK(cudaMemcpy(a1 + 1, buf.a, s.m * s.k * 2, cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaMemcpy(b1 + 1, buf.b, s.k * s.n * 2, cudaMemcpyDeviceToDevice));
        op.a = a1 + 1;
        op.b = b1 + 1;
      }
      const Verdict v = Check(skinny, buf, op, checker, st);
      if (!v.ok) ++failures;
      std::printf("%-4s skinny %-24s %s headroom %.3g %s\n", v.ok ? "ok" : "FAIL", ShapeText(s).c_str(),
                  shift ? "misaligned" : "aligned   ", v.headroom, v.why.c_str());
      if (shift) {
        CUDA_CHECK(cudaFree(a1));
        CUDA_CHECK(cudaFree(b1));
      }
    }
    // Run to run: a second launch on the same operands gives the same bits.
    Op op{s.dtype, buf.a, buf.b, buf.c, s.m, s.n, s.k};
    skinny.run(op, st);
    CUDA_CHECK(cudaStreamSynchronize(st));
    const std::vector<uint16_t> first = Download(buf.c, s.m * s.n);
    CUDA_CHECK(cudaMemsetAsync(buf.c, 0xff, buf.c_bytes(), st));
    skinny.run(op, st);
    CUDA_CHECK(cudaStreamSynchronize(st));
    const bool same = Download(buf.c, s.m * s.n) == first;
    if (!same) ++failures;
    std::printf("%-4s skinny %-24s run_to_run\n", same ? "ok" : "FAIL", ShapeText(s).c_str());
    Release(buf);
  }

  // Batch invariance: rows 0..m-1 of M = 32 equal the M = m result bit for bit,
  // for m across every member (1, 8, 9, 16, 17, 31).
  const Shape bases[] = {{32, 4096, 4096, DType::kBF16, false},
                         {32, 30522, 768, DType::kF16, false},
                         {32, 1000, 16384, DType::kBF16, false}};
  for (const Shape& base : bases) {
    Buffers buf;
    buf.s = base;
    Prepare(buf, seed += 7, checker, st);
    Op op{base.dtype, buf.a, buf.b, buf.c, base.m, base.n, base.k};
    skinny.run(op, st);
    CUDA_CHECK(cudaStreamSynchronize(st));
    const std::vector<uint16_t> full = Download(buf.c, base.m * base.n);
    int mismatched = 0;
    for (int64_t m : {1, 8, 9, 16, 17, 31}) {
      Op part = op;
      part.m = m;
      CUDA_CHECK(cudaMemsetAsync(buf.c, 0xff, buf.c_bytes(), st));
      skinny.run(part, st);
      CUDA_CHECK(cudaStreamSynchronize(st));
      const std::vector<uint16_t> rows = Download(buf.c, m * base.n);
      if (!std::equal(rows.begin(), rows.end(), full.begin())) {
        ++mismatched;
        std::printf("     batch invariance: M=%ld rows differ from M=32 at %s\n",
                    static_cast<long>(m), ShapeText(base).c_str());
      }
    }
    if (mismatched) ++failures;
    std::printf("%-4s skinny %-24s batch_invariant (6 row counts against M=32)\n",
                mismatched ? "FAIL" : "ok", ShapeText(base).c_str());
    Release(buf);
  }
  return failures;
}

// A candidate's own ragged shapes, full reference, then run-to-run bits.
int RaggedChecks(const Candidate& cand, const std::vector<Shape>& shapes, cudaStream_t st,
                 gc::Checker& checker) {
  int failures = 0;
  uint64_t seed = 5000;
  for (const Shape& s : shapes) {
    Buffers buf;
    buf.s = s;
    Prepare(buf, seed += 13, checker, st);
    const Op op{s.dtype, buf.a, buf.b, buf.c, s.m, s.n, s.k};
    const Verdict v = Check(cand, buf, op, checker, st);
    if (!v.ok) ++failures;
    const std::vector<uint16_t> first = Download(buf.c, s.m * s.n);
    CUDA_CHECK(cudaMemsetAsync(buf.c, 0xff, buf.c_bytes(), st));
    cand.run(op, st);
    CUDA_CHECK(cudaStreamSynchronize(st));
    const bool same = Download(buf.c, s.m * s.n) == first;
    if (!same) ++failures;
    std::printf("%-4s %s %-24s headroom %.3g run_to_run %s %s\n", v.ok && same ? "ok" : "FAIL",
                cand.name.c_str(), ShapeText(s).c_str(), v.headroom, same ? "same" : "DIFFERS",
                v.why.c_str());
    Release(buf);
  }
  return failures;
}

}  // namespace arbiter::transformer_bench
