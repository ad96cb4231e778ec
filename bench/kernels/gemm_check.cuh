// Checking and timing a GEMM kernel on the device, for the bench tools
// (bench/kernels, bench/skinny, bench/transformer): random operands in [-1, 1)
// (never zeros), an f64 reference computed on the device over the operands as
// stored (every row of C, or a sample of rows), and a checker that counts
// non-finite (unwritten: C is poisoned with NaN before every run) elements of
// C, bytes written past it into a guard region and, in the reference's rows,
// out-of-budget elements. Then what every tool times with: CUDA events around
// the launch alone, a 2x-L2 buffer to empty the cache before each sample, and
// median / IQR / min of the samples.
// Bench code: CUDA_CHECK and CUBLAS_CHECK exit on the spot, naming the call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "engine/dtype.h"
#include "kernels/common/launch_args.h"

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
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                      \
                   cublasGetStatusName(st_));                                                \
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

// Calls f with a value of the device element type of `d`.
template <typename F>
void ForDtype(DType d, F&& f) {
  switch (d) {
    case DType::kF32: f(float{}); break;
    case DType::kF64: f(double{}); break;
    case DType::kF16: f(__half{}); break;
    case DType::kBF16: f(__nv_bfloat16{}); break;
  }
}

// ---- shapes -----------------------------------------------------------------------

struct Shape {
  int64_t m, n, k;
};

inline std::string ShapeText(const Shape& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%ldx%ldx%ld", static_cast<long>(s.m), static_cast<long>(s.n),
                static_cast<long>(s.k));
  return buf;
}

// "MxNxK,MxNxK,..." (tokenizes `text` in place); malformed entries are skipped.
inline std::vector<Shape> ParseShapes(char* text) {
  std::vector<Shape> out;
  for (char* tok = std::strtok(text, ","); tok; tok = std::strtok(nullptr, ",")) {
    long m, n, kk;
    if (std::sscanf(tok, "%ldx%ldx%ld", &m, &n, &kk) == 3) out.push_back({m, n, kk});
  }
  return out;
}

// ---- the device and the candidates' launches ------------------------------------------

struct Device {
  cudaDeviceProp props{};
  int driver = 0, runtime = 0, cublas_version = 0;

  // "NAME, sm_XY, N SMs, L2 N MB, driver N, runtime N, cuBLAS N".
  std::string Describe() const {
    char buf[320];
    std::snprintf(buf, sizeof buf, "%s, sm_%d%d, %d SMs, L2 %d MB, driver %d, runtime %d, cuBLAS %d",
                  props.name, props.major, props.minor, props.multiProcessorCount,
                  props.l2CacheSize >> 20, driver, runtime, cublas_version);
    return buf;
  }
};

// The current device, and a cuBLAS handle created on it into *cublas.
inline Device OpenDevice(cublasHandle_t* cublas) {
  Device d;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaGetDeviceProperties(&d.props, device));
  CUDA_CHECK(cudaDriverGetVersion(&d.driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime));
  CUBLAS_CHECK(cublasCreate(cublas));
  CUBLAS_CHECK(cublasGetVersion(*cublas, &d.cublas_version));
  return d;
}

// Device scratch that grows to the largest request and is then reused.
class Scratch {
 public:
  void* Get(size_t bytes) {
    if (bytes == 0) return nullptr;
    if (bytes > bytes_) {
      CUDA_CHECK(cudaFree(ptr_));
      CUDA_CHECK(cudaMalloc(&ptr_, bytes));
      bytes_ = bytes;
    }
    return ptr_;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// One GEMM on the device: row-major C[m, n] = A[m, k] B[k, n] of `dtype`, contiguous.
struct Op {
  DType dtype;
  const void* a;
  const void* b;
  void* c;
  int64_t m, n, k;
};

inline kernels::LaunchArgs Args(DType dtype, const void* a, const void* b, void* c, int64_t m,
                                int64_t n, int64_t k, int sm_count) {
  kernels::LaunchArgs args;
  args.dtype = dtype;
  args.a = a;
  args.b = b;
  args.c = c;
  args.m = m;
  args.n = n;
  args.k = k;
  args.sm_count = sm_count;
  return args;
}

// Launches a family through its Launcher with the scratch it asks for; returns
// the launch's status.
inline cudaError_t Launch(const kernels::Launcher& launcher, kernels::LaunchArgs& args,
                          Scratch& scratch, cudaStream_t stream) {
  if (launcher.workspace_bytes != nullptr) {
    args.workspace_bytes = launcher.workspace_bytes(args);
    args.workspace = scratch.Get(args.workspace_bytes);
  }
  return launcher.launch(args, stream);
}

// Launches a family through its Launcher for `op`; exits naming the family on a launch error.
inline void RunFamily(const kernels::Launcher& launcher, const Op& op, int sm_count,
                      Scratch& scratch, cudaStream_t stream) {
  kernels::LaunchArgs args = Args(op.dtype, op.a, op.b, op.c, op.m, op.n, op.k, sm_count);
  const cudaError_t err = Launch(launcher, args, scratch, stream);
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s (%s)\n", launcher.name, cudaGetErrorName(err),
                 cudaGetErrorString(err));
    std::exit(2);
  }
}

inline cudaDataType_t CudaType(DType d) {
  return d == DType::kF16 ? CUDA_R_16F : d == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

// cublasGemmEx for row-major C = A B (as column-major C^T = B^T A^T), with the
// given leading dims, f32 accumulation and the default algorithm.
inline void RowMajorGemmEx(cublasHandle_t cublas, DType dtype, int64_t m, int64_t n, int64_t k,
                           const void* a, int64_t lda, const void* b, int64_t ldb, void* c,
                           int64_t ldc, cudaStream_t stream) {
  const float alpha = 1.f, beta = 0.f;
  const cudaDataType_t type = CudaType(dtype);
  CUBLAS_CHECK(cublasSetStream(cublas, stream));
  CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                            static_cast<int>(m), static_cast<int>(k), &alpha, b, type,
                            static_cast<int>(ldb), a, type, static_cast<int>(lda), &beta, c, type,
                            static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// RowMajorGemmEx for `op`, its operands contiguous.
inline void RowMajorGemmEx(cublasHandle_t cublas, const Op& op, cudaStream_t stream) {
  RowMajorGemmEx(cublas, op.dtype, op.m, op.n, op.k, op.a, op.k, op.b, op.n, op.c, op.n, stream);
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

// ref[i, col] = sum_k A[row, k] B[k, col] in f64 over the stored operands, for
// row = rows[i] (rows null: row = i), i < nrows: one element per thread, 16x16
// shared-memory tiles. grid.x walks N, grid.y the reference rows.
template <typename T>
__global__ void ReferenceKernel(const T* a, const T* b, const int64_t* rows, int64_t nrows,
                                double* ref, int64_t n, int64_t k) {
  __shared__ double as[16][17];
  __shared__ double bs[16][17];
  const int64_t ri = blockIdx.y * int64_t{16} + threadIdx.y;
  const int64_t col = blockIdx.x * int64_t{16} + threadIdx.x;
  const int64_t row = ri >= nrows ? -1 : rows != nullptr ? rows[ri] : ri;
  double acc = 0;
  for (int64_t k0 = 0; k0 < k; k0 += 16) {
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (row >= 0 && ka < k) ? ToDouble(a[row * k + ka]) : 0.0;
    bs[threadIdx.y][threadIdx.x] = (kb < k && col < n) ? ToDouble(b[kb * n + col]) : 0.0;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) acc = fma(as[threadIdx.y][kk], bs[kk][threadIdx.x], acc);
    __syncthreads();
  }
  if (row >= 0 && col < n) ref[ri * n + col] = acc;
}

template <typename T>
void LaunchReference(const T* a, const T* b, const int64_t* rows, int64_t nrows, double* ref,
                     int64_t n, int64_t k, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n + 15) / 16), static_cast<unsigned>((nrows + 15) / 16));
  ReferenceKernel<T><<<grid, dim3(16, 16), 0, stream>>>(a, b, rows, nrows, ref, n, k);
  CUDA_CHECK(cudaGetLastError());
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
  unsigned long long nonfinite;        // anywhere in C (unwritten or NaN/inf)
  unsigned long long out_of_budget;    // finite, in the reference's rows
  unsigned long long max_err_bits;     // max |c - ref|
  unsigned long long max_excess_bits;  // max (|c - ref| - u*|ref|), clamped at 0
  unsigned long long first_bad;        // smallest failing index (or ~0)
  unsigned long long guard_touched;
};

inline double FromBits(unsigned long long bits) {
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// Counts the non-finite elements of all of C and the guard bytes written.
template <typename T>
__global__ void FiniteKernel(const T* c, int64_t count, const unsigned char* guard,
                             int guard_bytes, CheckResult* out) {
  unsigned long long nonfinite = 0, first = ~0ull;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    if (!isfinite(ToDouble(c[i]))) {
      ++nonfinite;
      first = min(first, static_cast<unsigned long long>(i));
    }
  }
  if (blockIdx.x == 0) {
    for (int i = threadIdx.x; i < guard_bytes; i += blockDim.x) {
      if (guard[i] != 0xff) atomicAdd(&out->guard_touched, 1ull);
    }
  }
  if (nonfinite) atomicAdd(&out->nonfinite, nonfinite);
  if (first != ~0ull) atomicMin(&out->first_bad, first);
}

// Compares the finite elements of C's reference rows (as ReferenceKernel) with
// the budget fixed_tol + u*|ref|.
template <typename T>
__global__ void CompareKernel(const T* c, const int64_t* rows, int64_t nrows, const double* ref,
                              int64_t n, double fixed_tol, double u, CheckResult* out) {
  double max_err = 0, max_excess = 0;
  unsigned long long bad = 0, first = ~0ull;
  const int64_t count = nrows * n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ri = i / n, col = i % n;
    const int64_t ci = (rows != nullptr ? rows[ri] : ri) * n + col;
    const double v = ToDouble(c[ci]);
    if (!isfinite(v)) continue;  // FiniteKernel counts it
    const double r = ref[i];
    const double err = fabs(v - r);
    max_err = fmax(max_err, err);
    max_excess = fmax(max_excess, err - u * fabs(r));
    if (err > fixed_tol + u * fabs(r)) {
      ++bad;
      first = min(first, static_cast<unsigned long long>(ci));
    }
  }
  if (bad) atomicAdd(&out->out_of_budget, bad);
  if (first != ~0ull) atomicMin(&out->first_bad, first);
  atomicMax(&out->max_err_bits, static_cast<unsigned long long>(__double_as_longlong(max_err)));
  atomicMax(&out->max_excess_bits,
            static_cast<unsigned long long>(__double_as_longlong(fmax(max_excess, 0.0))));
}

// The device side of checking: its counters and max|ref| live here.
// Not thread-safe; one per stream.
class Checker {
 public:
  Checker() {
    CUDA_CHECK(cudaMalloc(&result_, sizeof(CheckResult)));
    CUDA_CHECK(cudaMalloc(&max_bits_, sizeof(unsigned long long)));
  }
  ~Checker() {
    cudaFree(result_);
    cudaFree(max_bits_);
  }
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  // max |ref[i]| over `count` elements; waits for the stream.
  double MaxAbs(const double* ref, int64_t count, cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(max_bits_, 0, sizeof(unsigned long long), stream));
    MaxAbsKernel<<<256, 256, 0, stream>>>(ref, count, max_bits_);
    CUDA_CHECK(cudaGetLastError());
    unsigned long long bits = 0;
    CUDA_CHECK(cudaMemcpyAsync(&bits, max_bits_, sizeof bits, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return FromBits(bits);
  }

  // Fills C ([m, n] of `element_bytes`) and the guard past it with 0xff bytes:
  // NaN in every float format, so an element the run leaves unwritten fails.
  static void Poison(void* c, int64_t m, int64_t n, size_t element_bytes, cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(c, 0xff, m * n * element_bytes + kGuardBytes, stream));
  }

  // Checks C ([m, n], poisoned before the run) against `ref` (ReferenceKernel's
  // rows) with budget fixed_tol + u*|ref|; waits for the stream.
  template <typename T>
  CheckResult Check(const T* c, int64_t m, int64_t n, const int64_t* rows, int64_t nrows,
                    const double* ref, double fixed_tol, double u, cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(result_, 0, sizeof(CheckResult), stream));
    CUDA_CHECK(cudaMemsetAsync(&result_->first_bad, 0xff, sizeof(unsigned long long), stream));
    const auto* guard = reinterpret_cast<const unsigned char*>(c + m * n);
    FiniteKernel<T><<<1024, 256, 0, stream>>>(c, m * n, guard, kGuardBytes, result_);
    CompareKernel<T><<<1024, 256, 0, stream>>>(c, rows, nrows, ref, n, fixed_tol, u, result_);
    CUDA_CHECK(cudaGetLastError());
    CheckResult r;
    CUDA_CHECK(cudaMemcpyAsync(&r, result_, sizeof r, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return r;
  }

 private:
  CheckResult* result_ = nullptr;
  unsigned long long* max_bits_ = nullptr;
};

// ---- timing -------------------------------------------------------------------

// Reads the whole buffer (bypassing L1), so L2 ends up holding its clean lines
// and nothing of the previous sample. The xor goes to `sink` only when it is
// (practically) impossible, so the loads cannot be dropped.
static __global__ void ReadFlushKernel(const uint4* __restrict__ p, int64_t count,
                                       unsigned* sink) {
  unsigned x = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) sink[0] = x;
}

// A buffer of twice the L2, to empty it before a timed sample.
class L2Flush {
 public:
  explicit L2Flush(const cudaDeviceProp& props)
      : bytes_(2 * static_cast<size_t>(props.l2CacheSize)), sm_count_(props.multiProcessorCount) {
    CUDA_CHECK(cudaMalloc(&buf_, bytes_));
    CUDA_CHECK(cudaMalloc(&sink_, sizeof(unsigned)));
  }
  L2Flush(const L2Flush&) = delete;
  L2Flush& operator=(const L2Flush&) = delete;

  // The daemon's flush: a memset (byte `sample`), which leaves the L2 full of
  // dirty lines that the timed kernel then pays to write back.
  void Write(int sample, cudaStream_t stream) const {
    CUDA_CHECK(cudaMemsetAsync(buf_, sample & 0xff, bytes_, stream));
  }
  // A read pass: the lines left behind are clean.
  void Read(cudaStream_t stream) const {
    ReadFlushKernel<<<4 * sm_count_, 512, 0, stream>>>(static_cast<const uint4*>(buf_),
                                                         bytes_ / sizeof(uint4), sink_);
  }

 private:
  size_t bytes_;
  int sm_count_;
  void* buf_ = nullptr;
  unsigned* sink_ = nullptr;
};

// Device time of what a callable enqueues, by a pair of CUDA events.
class EventTimer {
 public:
  EventTimer() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Microseconds between events recorded before and after `enqueue(stream)`;
  // waits for the second.
  template <typename F>
  double Us(cudaStream_t stream, F&& enqueue) {
    return Us(stream, enqueue, [] {});
  }
  // The same, calling `enqueued()` once the second event is enqueued, before
  // waiting for it (a SampleHold's Release).
  template <typename F, typename G>
  double Us(cudaStream_t stream, F&& enqueue, G&& enqueued) {
    CUDA_CHECK(cudaEventRecord(start_, stream));
    enqueue();
    CUDA_CHECK(cudaEventRecord(stop_, stream));
    enqueued();
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e3;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// The q-quantile (0..1) of `v`, linearly interpolated.
inline double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

struct Summary {
  double median = 0, spread = 0, min = 0;  // spread: IQR / median
};

// Median, IQR/median and min of non-empty `samples`.
inline Summary Summarize(const std::vector<double>& samples) {
  Summary s;
  s.median = Percentile(samples, 0.5);
  s.spread = (Percentile(samples, 0.75) - Percentile(samples, 0.25)) / s.median;
  s.min = *std::min_element(samples.begin(), samples.end());
  return s;
}

}  // namespace arbiter::gemm_check
