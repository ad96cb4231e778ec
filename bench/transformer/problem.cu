// One problem's operands and the correctness check (problem.h).
#include "bench/transformer/problem.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "bench/transformer/candidates.h"

namespace arbiter::transformer_bench {

namespace {

double Unit(DType d) { return d == DType::kBF16 ? 0x1.0p-8 : 0x1.0p-11; }

// Rows checked against the reference: all of a small problem; else 48 spread
// over M plus the last (the edge tiles).
std::vector<int64_t> SampleRows(const Shape& s) {
  std::vector<int64_t> rows;
  if (double(s.m) * s.n * s.k <= 4e10 || s.m <= 64) {
    for (int64_t r = 0; r < s.m; ++r) rows.push_back(r);
    return rows;
  }
  for (int i = 0; i < 48; ++i) rows.push_back(s.m * i / 48 + (i * 7) % std::max<int64_t>(1, s.m / 48));
  rows.push_back(s.m - 1);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

}  // namespace

std::string ShapeText(const Shape& s) {
  return gc::ShapeText({s.m, s.n, s.k}) + " " + gc::Name(s.dtype);
}

void Prepare(Buffers& buf, uint64_t seed, gc::Checker& checker, cudaStream_t st) {
  const Shape& s = buf.s;
  CUDA_CHECK(cudaMalloc(&buf.a, s.m * s.k * 2));
  CUDA_CHECK(cudaMalloc(&buf.b, s.k * s.n * 2));
  CUDA_CHECK(cudaMalloc(&buf.c, buf.c_bytes() + kGuardBytes));
  const std::vector<int64_t> rows = SampleRows(s);
  buf.nrows = static_cast<int>(rows.size());
  CUDA_CHECK(cudaMalloc(&buf.rows, rows.size() * sizeof(int64_t)));
  CUDA_CHECK(cudaMemcpy(buf.rows, rows.data(), rows.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMalloc(&buf.ref, static_cast<size_t>(buf.nrows) * s.n * sizeof(double)));
  gc::ForDtype(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    gc::FillKernel<T><<<2048, 256, 0, st>>>(static_cast<T*>(buf.a), s.m * s.k, seed);
    gc::FillKernel<T><<<2048, 256, 0, st>>>(static_cast<T*>(buf.b), s.k * s.n, seed + 1);
    CUDA_CHECK(cudaGetLastError());
    gc::LaunchReference(static_cast<const T*>(buf.a), static_cast<const T*>(buf.b), buf.rows,
                        buf.nrows, buf.ref, s.n, s.k, st);
  });
  buf.max_ref = checker.MaxAbs(buf.ref, static_cast<int64_t>(buf.nrows) * s.n, st);
}

void Release(Buffers& buf) {
  CUDA_CHECK(cudaFree(buf.a));
  CUDA_CHECK(cudaFree(buf.b));
  CUDA_CHECK(cudaFree(buf.c));
  CUDA_CHECK(cudaFree(buf.rows));
  CUDA_CHECK(cudaFree(buf.ref));
}

// Poisons C and its guard, runs, checks; C keeps the candidate's output.
Verdict Check(const Candidate& cand, const Buffers& buf, const Op& op, gc::Checker& checker,
              cudaStream_t st) {
  const Shape& s = buf.s;
  gc::Checker::Poison(buf.c, s.m, s.n, 2, st);
  cand.run(op, st);
  CUDA_CHECK(cudaGetLastError());
  const double tol = cand.abs + cand.rel * std::sqrt(double(s.k)) * buf.max_ref;
  CheckResult r;
  gc::ForDtype(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    r = checker.Check(static_cast<const T*>(buf.c), s.m, s.n, buf.rows, buf.nrows, buf.ref, tol,
                      Unit(s.dtype), st);
  });
  const double excess = gc::FromBits(r.max_excess_bits);
  Verdict v;
  v.ok = r.nonfinite == 0 && r.out_of_budget == 0 && r.guard_touched == 0;
  const double measured = buf.max_ref > 0 ? excess / (std::sqrt(double(s.k)) * buf.max_ref) : 0;
  v.headroom = measured > 0 ? cand.rel / measured : 1e30;
  if (!v.ok) {
    char why[256];
    std::snprintf(why, sizeof why, "%llu non-finite, %llu over budget, guard %llu, first C[%lld,%lld]",
                  r.nonfinite, r.out_of_budget, r.guard_touched,
                  static_cast<long long>(r.first_bad / s.n), static_cast<long long>(r.first_bad % s.n));
    v.why = why;
  }
  return v;
}

}  // namespace arbiter::transformer_bench
