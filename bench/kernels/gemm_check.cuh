// Checking a GEMM kernel on the device, for the bench tools (bench/kernels,
// bench/skinny): random operands in [-1, 1) (never zeros), an f64 reference
// computed on the device over the operands as stored, and a checker that counts
// non-finite (unwritten: C is poisoned with NaN before every run) and
// out-of-budget elements of C and bytes written past it into a guard region.
// Bench code: CUDA_CHECK and CUBLAS_CHECK exit on the spot, naming the call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "engine/dtype.h"

namespace arbiter::gemm_check {

#define CUDA_CHECK(call)                                                                     \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,                \
                   cudaGetErrorName(err_), cudaGetErrorString(err_));                        \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)
#define CUBLAS_CHECK(call)                                                                   \
  do {                                                                                       \
    cublasStatus_t st_ = (call);                                                             \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                      \
      std::fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #call,       \
                   static_cast<int>(st_));                                                   \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

constexpr size_t kGuardBytes = 4096;

inline const char* Name(DType d) {
  switch (d) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}
// ---- device helpers: random fill, f64 reference, checker ----------------------

__device__ __forceinline__ uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T>
__device__ __forceinline__ T FromDouble(double v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __double2half(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __double2bfloat16(v);
  } else {
    return static_cast<T>(v);
  }
}
template <typename T>
__device__ __forceinline__ double ToDouble(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return static_cast<double>(v);
  }
}

// Uniform in [-1, 1), rounded to T.
template <typename T>
__global__ void FillKernel(T* out, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = SplitMix(seed * 0x100000001b3ull + static_cast<uint64_t>(i));
    const double u = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    out[i] = FromDouble<T>(2.0 * u - 1.0);
  }
}

// C = A B in f64 over the stored operands: one element per thread, 16x16
// shared-memory tiles. grid.x walks N, grid.y walks M, grid.z splits nothing.
template <typename T>
__global__ void ReferenceKernel(const T* a, const T* b, double* c, int m, int n, int k) {
  __shared__ double as[16][17];
  __shared__ double bs[16][17];
  const int row = blockIdx.y * 16 + threadIdx.y;
  const int col = blockIdx.x * 16 + threadIdx.x;
  double acc = 0;
  for (int k0 = 0; k0 < k; k0 += 16) {
    const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] =
        (row < m && ka < k) ? ToDouble(a[static_cast<int64_t>(row) * k + ka]) : 0.0;
    bs[threadIdx.y][threadIdx.x] =
        (kb < k && col < n) ? ToDouble(b[static_cast<int64_t>(kb) * n + col]) : 0.0;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) acc = fma(as[threadIdx.y][kk], bs[kk][threadIdx.x], acc);
    __syncthreads();
  }
  if (row < m && col < n) c[static_cast<int64_t>(row) * n + col] = acc;
}

static __global__ void MaxAbsKernel(const double* ref, int64_t count, unsigned long long* out) {
  double local = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    local = fmax(local, fabs(ref[i]));
  }
  // Non-negative doubles order like their bit patterns.
  atomicMax(out, static_cast<unsigned long long>(__double_as_longlong(local)));
}

struct CheckResult {
  unsigned long long nonfinite;
  unsigned long long out_of_budget;
  unsigned long long max_err_bits;     // max |c - ref|
  unsigned long long max_excess_bits;  // max (|c - ref| - u*|ref|), clamped at 0
  unsigned long long first_bad;        // smallest failing index (or ~0)
  unsigned long long guard_touched;
};

template <typename T>
__global__ void CheckKernel(const T* c, const double* ref, int64_t count, double fixed_tol,
                            double u, const unsigned char* guard, int guard_bytes,
                            CheckResult* out) {
  double max_err = 0, max_excess = 0;
  unsigned long long nonfinite = 0, bad = 0, first = ~0ull;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const double v = ToDouble(c[i]);
    const double r = ref[i];
    if (!isfinite(v)) {
      ++nonfinite;
      first = min(first, static_cast<unsigned long long>(i));
      continue;
    }
    const double err = fabs(v - r);
    max_err = fmax(max_err, err);
    max_excess = fmax(max_excess, err - u * fabs(r));
    if (err > fixed_tol + u * fabs(r)) {
      ++bad;
      first = min(first, static_cast<unsigned long long>(i));
    }
  }
  if (blockIdx.x == 0) {
    for (int i = threadIdx.x; i < guard_bytes; i += blockDim.x) {
      if (guard[i] != 0xff) atomicAdd(&out->guard_touched, 1ull);
    }
  }
  if (nonfinite) atomicAdd(&out->nonfinite, nonfinite);
  if (bad) atomicAdd(&out->out_of_budget, bad);
  if (first != ~0ull) atomicMin(&out->first_bad, first);
  atomicMax(&out->max_err_bits, static_cast<unsigned long long>(__double_as_longlong(max_err)));
  atomicMax(&out->max_excess_bits,
            static_cast<unsigned long long>(__double_as_longlong(fmax(max_excess, 0.0))));
}

// The q-quantile (0..1) of `v`, linearly interpolated.
inline double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

}  // namespace arbiter::gemm_check
