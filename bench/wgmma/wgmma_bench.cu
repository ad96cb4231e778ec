// wgmma_bench: for each shape and dtype, first checks every wgmma tile config
// (and cuBLAS) against an f64 reference on NaN-poisoned C, then times the
// configs that passed and cublasGemmEx (CUBLAS_COMPUTE_32F, default algo) in
// the same process with CUDA events: warm-up, then `reps` timed launches of
// each, round-robin so all see the same clocks, each after a read pass over a
// buffer of twice the L2 size, so every launch starts cold. Random operands, uniform in [-1, 1). A time is printed only for an
// output that passed its check.
//
//   wgmma_bench [--reps N] [--warmup N] [--dtypes bf16,f16] [--shapes MxNxK,...]
//
// Exits non-zero if any check failed. Bench tool: exits on CUDA errors.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "bench/kernels/gemm_check.cuh"
#include "kernels/wgmma/wgmma_gemm.h"

namespace {

using arbiter::wgmma::WgmmaDType;
using arbiter::gemm_check::Shape;
using arbiter::wgmma::WgmmaTile;

// The candidate contract's budget (kernels/wgmma/wgmma_candidate.cc).
constexpr double kAbs = 1e-6;
constexpr double kRel = 1e-5;

// ------------------------------------------------------------ device helpers

__device__ __forceinline__ float LoadAsFloat(const uint16_t* p, size_t i, bool bf16) {
  const uint16_t bits = p[i];
  return bf16 ? __bfloat162float(__ushort_as_bfloat16(bits)) : __half2float(__ushort_as_half(bits));
}

__global__ void FillRandom(uint16_t* p, size_t count, uint64_t seed, bool bf16) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 32;
    const float u = static_cast<float>(x & 0xFFFFFF) / 8388608.0f - 1.0f;  // [-1, 1)
    p[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(u)) : __half_as_ushort(__float2half_rn(u));
  }
}

// ref[r * n + j] = sum_k A[rows[r], k] * B[k, j] in f64, k ascending. Each
// thread owns one column and up to 8 of the listed rows (B read once for 8).
__global__ void ReferenceRows(const uint16_t* a, const uint16_t* b, const int* rows, int num_rows,
                              int64_t n, int64_t k, bool bf16, double* ref) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int r0 = blockIdx.y * 8;
  if (j >= n) return;
  double acc[8] = {};
  int64_t row_off[8];
  for (int t = 0; t < 8; ++t) row_off[t] = (r0 + t < num_rows ? rows[r0 + t] : rows[0]) * k;
  for (int64_t kk = 0; kk < k; ++kk) {
    const double bv = LoadAsFloat(b, kk * n + j, bf16);
#pragma unroll
    for (int t = 0; t < 8; ++t) acc[t] += static_cast<double>(LoadAsFloat(a, row_off[t] + kk, bf16)) * bv;
  }
  for (int t = 0; t < 8 && r0 + t < num_rows; ++t) ref[(r0 + t) * n + j] = acc[t];
}

// Non-negative floats order like their bit patterns.
__device__ void AtomicMaxFloat(float* dst, float v) {
  atomicMax(reinterpret_cast<unsigned int*>(dst), __float_as_uint(v));
}

__global__ void MaxAbs(const double* ref, size_t count, float* out) {
  float m = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    m = fmaxf(m, static_cast<float>(fabs(ref[i])));
  }
  AtomicMaxFloat(out, m);
}

struct CheckStats {
  float worst_ratio;      // max |c - ref| / tolerance (pass: <= 1)
  float worst_rel;        // max (|c - ref| - u|ref|) / (sqrt(K) max|ref|): the measured "rel"
  unsigned int bad;       // elements over tolerance or not finite, in the checked rows
  unsigned int nonfinite; // non-finite elements anywhere in C (unwritten poison)
};

__global__ void CompareRows(const uint16_t* c, const double* ref, const int* rows, int num_rows,
                            int64_t n, double k, double max_ref, double u, bool bf16,
                            CheckStats* stats) {
  const size_t count = static_cast<size_t>(num_rows) * n;
  float worst_ratio = 0, worst_rel = 0;
  unsigned int bad = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const size_t r = i / n, j = i % n;
    const double v = LoadAsFloat(c, rows[r] * n + j, bf16);
    const double want = ref[i];
    const double err = fabs(v - want);
    const double tol = kAbs + kRel * sqrt(k) * max_ref + u * fabs(want);
    if (!isfinite(v) || !(err <= tol)) ++bad;
    const double ratio = isfinite(v) ? err / tol : 1e30;
    worst_ratio = fmaxf(worst_ratio, static_cast<float>(ratio));
    worst_rel = fmaxf(worst_rel, static_cast<float>(fmax(0.0, err - u * fabs(want)) /
                                                    (sqrt(k) * max_ref + 1e-300)));
  }
  AtomicMaxFloat(&stats->worst_ratio, worst_ratio);
  AtomicMaxFloat(&stats->worst_rel, worst_rel);
  if (bad) atomicAdd(&stats->bad, bad);
}

__global__ void CountNonFinite(const uint16_t* c, size_t count, bool bf16, CheckStats* stats) {
  unsigned int bad = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    if (!isfinite(LoadAsFloat(c, i, bf16))) ++bad;
  }
  if (bad) atomicAdd(&stats->nonfinite, bad);
}

// Reads the whole buffer so the L2 holds only clean lines of it afterwards.
__global__ void ReadFlush(const int4* p, size_t count, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7F3A9C21) *sink = acc;  // practically never; keeps the loads alive
}

// ------------------------------------------------------------ host side

struct Options {
  int reps = 30;
  int warmup = 5;
  std::vector<WgmmaDType> dtypes = {WgmmaDType::kBF16, WgmmaDType::kF16};
  std::vector<Shape> shapes;
};

std::vector<Shape> DefaultShapes() {
  return {
      // ragged and non-square correctness shapes first
      {128, 128, 64}, {1, 256, 64}, {1000, 1000, 1024}, {777, 328, 2048}, {777, 333, 2048},
      {4096, 1024, 512}, {4095, 4096, 4096},
      // cubes
      {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {6144, 6144, 6144},
      {8192, 8192, 8192},
      // rectangles
      {16, 4096, 4096}, {64, 8192, 8192}, {8192, 2048, 4096}, {2048, 8192, 4096},
      {8192, 8192, 1024},
  };
}

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> items;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    if (end > pos) items.push_back(list.substr(pos, end - pos));
    pos = end + 1;
  }
  return items;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  o.shapes = DefaultShapes();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--reps") {
      o.reps = std::atoi(value), ++i;
    } else if (arg == "--warmup") {
      o.warmup = std::atoi(value), ++i;
    } else if (arg == "--dtypes") {
      o.dtypes.clear();
      for (const std::string& name : Split(value)) {
        if (name == "bf16") o.dtypes.push_back(WgmmaDType::kBF16);
        if (name == "f16") o.dtypes.push_back(WgmmaDType::kF16);
      }
      ++i;
    } else if (arg == "--shapes") {
      if (i + 1 < argc) o.shapes = arbiter::gemm_check::ParseShapes(argv[i + 1]);
      ++i;
    } else {
      std::fprintf(stderr, "usage: wgmma_bench [--reps N] [--warmup N] [--dtypes bf16,f16] "
                           "[--shapes MxNxK,...]\n");
      std::exit(2);
    }
  }
  return o;
}

struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
};

Timing Summarize(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  Timing t;
  const size_t n = ms.size();
  t.median_us = 1e3 * (n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]));
  t.min_us = 1e3 * ms.front();
  t.max_us = 1e3 * ms.back();
  return t;
}

class Bench {
 public:
  explicit Bench(const Options& options) : options_(options) {
    CUDA_CHECK(cudaStreamCreate(&stream_));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    CUDA_CHECK(cudaGetDeviceProperties(&props_, 0));
    flush_bytes_ = 2 * static_cast<size_t>(props_.l2CacheSize);
    CUDA_CHECK(cudaMalloc(&flush_, flush_bytes_));
    CUDA_CHECK(cudaMemset(flush_, 1, flush_bytes_));
    CUDA_CHECK(cudaMalloc(&sink_, sizeof(int)));
    CUDA_CHECK(cudaMalloc(&stats_, sizeof(CheckStats)));
    CUDA_CHECK(cudaMalloc(&max_ref_, sizeof(float)));
    for (auto& per_variant : events_) {
      for (cudaEvent_t& e : per_variant) CUDA_CHECK(cudaEventCreate(&e));
    }
  }

  void PrintDevice() const {
    int driver = 0, runtime = 0, cublas_version = 0;
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    CUBLAS_CHECK(cublasGetVersion(cublas_, &cublas_version));
    std::printf("device: %s, sm_%d%d, %d SMs, L2 %d MB, driver API %d, runtime %d, cuBLAS %d\n",
                props_.name, props_.major, props_.minor, props_.multiProcessorCount,
                props_.l2CacheSize >> 20, driver, runtime, cublas_version);
    std::printf("method: CUDA events around each launch; %d warm-up, %d timed reps, kernels "
                "interleaved rep by rep, each launch after a read of a %zu MB buffer (2x L2); "
                "median [min-max] us\n",
                options_.warmup, options_.reps, flush_bytes_ >> 20);
  }

  // Runs every shape for one dtype; appends table rows. Returns false if any check failed.
  bool RunDType(WgmmaDType dtype, std::vector<std::string>* rows) {
    bool all_ok = true;
    uint64_t seed = dtype == WgmmaDType::kBF16 ? 0x1234 : 0x5678;
    for (const Shape& s : options_.shapes) all_ok &= RunShape(dtype, s, ++seed, rows);
    return all_ok;
  }

 private:
  static constexpr int kMaxReps = 100;
  static constexpr size_t kMaxVariants = 12;  // every tile config and cuBLAS

  bool RunShape(WgmmaDType dtype, const Shape& s, uint64_t seed, std::vector<std::string>* rows) {
    const bool bf16 = dtype == WgmmaDType::kBF16;
    const char* dname = bf16 ? "bf16" : "f16";
    char shape_name[64];
    std::snprintf(shape_name, sizeof(shape_name), "%ldx%ldx%ld", s.m, s.n, s.k);
    const size_t a_count = s.m * s.k, b_count = s.k * s.n, c_count = s.m * s.n;
    uint16_t *a, *b, *c;
    CUDA_CHECK(cudaMalloc(&a, a_count * 2));
    CUDA_CHECK(cudaMalloc(&b, b_count * 2));
    CUDA_CHECK(cudaMalloc(&c, c_count * 2));
    FillRandom<<<1024, 256, 0, stream_>>>(a, a_count, seed * 2 + 1, bf16);
    FillRandom<<<1024, 256, 0, stream_>>>(b, b_count, seed * 2 + 2, bf16);
    CUDA_CHECK(cudaGetLastError());

    // Reference rows: all of them up to ~2.5e11 multiply-adds, else a spread
    // of rows (every element of C is still checked for being written).
    std::vector<int> row_list;
    const double work = static_cast<double>(s.m) * s.n * s.k;
    if (work <= 2.5e11) {
      for (int64_t r = 0; r < s.m; ++r) row_list.push_back(static_cast<int>(r));
    } else {
      const int64_t step = std::max<int64_t>(1, s.m / 96);
      for (int64_t r = 0; r < s.m; r += step) row_list.push_back(static_cast<int>(r));
      for (int64_t r = std::max<int64_t>(0, s.m - 130); r < s.m; r += 7) row_list.push_back(static_cast<int>(r));
      row_list.push_back(static_cast<int>(s.m - 1));
    }
    const int num_rows = static_cast<int>(row_list.size());
    int* rows_dev;
    double* ref;
    CUDA_CHECK(cudaMalloc(&rows_dev, row_list.size() * sizeof(int)));
    CUDA_CHECK(cudaMemcpy(rows_dev, row_list.data(), row_list.size() * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&ref, static_cast<size_t>(num_rows) * s.n * sizeof(double)));
    dim3 ref_grid(static_cast<unsigned>((s.n + 127) / 128), static_cast<unsigned>((num_rows + 7) / 8));
    ReferenceRows<<<ref_grid, 128, 0, stream_>>>(a, b, rows_dev, num_rows, s.n, s.k, bf16, ref);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemsetAsync(max_ref_, 0, sizeof(float), stream_));
    MaxAbs<<<512, 256, 0, stream_>>>(ref, static_cast<size_t>(num_rows) * s.n, max_ref_);
    float max_ref = 0;
    CUDA_CHECK(cudaMemcpyAsync(&max_ref, max_ref_, sizeof(float), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    const double u = bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);

    auto check = [&](CheckStats* out) {
      CUDA_CHECK(cudaMemsetAsync(stats_, 0, sizeof(CheckStats), stream_));
      CompareRows<<<1024, 256, 0, stream_>>>(c, ref, rows_dev, num_rows, s.n, static_cast<double>(s.k),
                                            max_ref, u, bf16, stats_);
      CountNonFinite<<<1024, 256, 0, stream_>>>(c, c_count, bf16, stats_);
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaMemcpyAsync(out, stats_, sizeof(CheckStats), cudaMemcpyDeviceToHost, stream_));
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      return out->bad == 0 && out->nonfinite == 0;
    };
    auto poison = [&] { CUDA_CHECK(cudaMemsetAsync(c, 0xFF, c_count * 2, stream_)); };  // 0xFFFF: NaN

    // Every wgmma tile config, then cuBLAS (row-major via C^T = B^T A^T in column-major).
    struct Variant {
      std::string name;
      std::function<void()> launch;  // empty: declined
      std::string declined;
      bool ok = false;
      CheckStats stats{};
      Timing timing;
    };
    std::vector<Variant> variants;
    for (WgmmaTile tile : arbiter::wgmma::kAllWgmmaTiles) {
      arbiter::wgmma::WgmmaGemmArgs args;
      args.dtype = dtype;
      args.tile = tile;
      args.m = s.m, args.n = s.n, args.k = s.k;
      args.a = a, args.b = b, args.c = c;
      args.num_sms = props_.multiProcessorCount;
      args.workspace_bytes = arbiter::wgmma::WgmmaWorkspaceBytes(args);  // stream-K partials
      args.workspace = workspace_.Get(args.workspace_bytes);
      Variant v;
      v.name = arbiter::wgmma::WgmmaTileName(tile);
      if (const char* why = arbiter::wgmma::WgmmaUnsupportedReason(args)) {
        v.declined = why;
      } else {
        v.launch = [this, args] { CUDA_CHECK(arbiter::wgmma::LaunchWgmmaGemm(args, stream_)); };
      }
      variants.push_back(std::move(v));
    }
    const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    Variant cublas;
    cublas.name = "cublas";
    cublas.launch = [this, s, a, b, c, type] {
      const float alpha = 1.0f, beta = 0.0f;
      CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(s.n),
                                static_cast<int>(s.m), static_cast<int>(s.k), &alpha, b, type,
                                static_cast<int>(s.n), a, type, static_cast<int>(s.k), &beta, c, type,
                                static_cast<int>(s.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    variants.push_back(std::move(cublas));

    // Check each on poisoned C; only those that pass are timed.
    bool all_ok = true;
    std::vector<Variant*> timed;
    for (Variant& v : variants) {
      if (!v.launch) continue;
      poison();
      v.launch();
      v.ok = check(&v.stats);
      std::fprintf(stderr, "check %s %s %s: %s worst err/tol %.3g, measured rel %.3g, bad %u, unwritten %u\n",
                   dname, shape_name, v.name.c_str(), v.ok ? "PASS" : "FAIL", v.stats.worst_ratio,
                   v.stats.worst_rel, v.stats.bad, v.stats.nonfinite);
      if (v.ok) {
        timed.push_back(&v);
      } else {
        all_ok = false;
      }
    }
    std::vector<std::function<void()>> launches;
    for (Variant* v : timed) launches.push_back(v->launch);
    const std::vector<Timing> timings = TimeInterleaved(launches);
    for (size_t i = 0; i < timed.size(); ++i) timed[i]->timing = timings[i];

    char cell[160];
    std::string line = std::string("| ") + dname + " | " + shape_name + " |";
    double best_us = 0, cublas_us = 0;
    float worst_ratio = 0;  // over the wgmma configs that passed
    for (const Variant& v : variants) {
      if (v.ok && v.name != "cublas") worst_ratio = std::max(worst_ratio, v.stats.worst_ratio);
      if (!v.launch) {
        std::snprintf(cell, sizeof(cell), " declined (%s) |", v.declined.c_str());
      } else if (!v.ok) {
        std::snprintf(cell, sizeof(cell), " FAILED check (bad %u, unwritten %u) |", v.stats.bad,
                      v.stats.nonfinite);
      } else {
        std::snprintf(cell, sizeof(cell), " %.1f [%.1f-%.1f] |", v.timing.median_us,
                      v.timing.min_us, v.timing.max_us);
        if (v.name == "cublas") {
          cublas_us = v.timing.median_us;
        } else if (best_us == 0 || v.timing.median_us < best_us) {
          best_us = v.timing.median_us;
        }
      }
      line += cell;
    }
    const double flops = 2.0 * s.m * s.n * s.k;
    if (best_us > 0 && cublas_us > 0) {
      std::snprintf(cell, sizeof(cell), " %.0f | %.0f | %.1f%% | %.2f |", flops / best_us * 1e-6,
                    flops / cublas_us * 1e-6, 100.0 * cublas_us / best_us, worst_ratio);
    } else {
      std::snprintf(cell, sizeof(cell), " - | - | - | - |");
    }
    line += cell;
    rows->push_back(line);
    std::fprintf(stderr, "%s\n", line.c_str());

    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
    CUDA_CHECK(cudaFree(c));
    CUDA_CHECK(cudaFree(rows_dev));
    CUDA_CHECK(cudaFree(ref));
    return all_ok;
  }

  // Times the launches round-robin (rep i of every launch before rep i + 1 of
  // any), so all see the same clock and thermal state; each timed launch
  // follows a cache flush, outside its events.
  std::vector<Timing> TimeInterleaved(const std::vector<std::function<void()>>& launches) {
    const int reps = std::min(options_.reps, kMaxReps);
    const size_t count = std::min(launches.size(), kMaxVariants);
    for (int i = 0; i < options_.warmup; ++i) {
      for (size_t v = 0; v < count; ++v) launches[v]();
    }
    for (int i = 0; i < reps; ++i) {
      for (size_t v = 0; v < count; ++v) {
        Flush();
        CUDA_CHECK(cudaEventRecord(events_[v][2 * i], stream_));
        launches[v]();
        CUDA_CHECK(cudaEventRecord(events_[v][2 * i + 1], stream_));
      }
    }
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<Timing> out;
    for (size_t v = 0; v < count; ++v) {
      std::vector<float> ms(reps);
      for (int i = 0; i < reps; ++i) {
        CUDA_CHECK(cudaEventElapsedTime(&ms[i], events_[v][2 * i], events_[v][2 * i + 1]));
      }
      out.push_back(Summarize(ms));
    }
    return out;
  }

  void Flush() {
    ReadFlush<<<props_.multiProcessorCount * 4, 512, 0, stream_>>>(
        static_cast<const int4*>(flush_), flush_bytes_ / sizeof(int4), sink_);
    CUDA_CHECK(cudaGetLastError());
  }

  Options options_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudaDeviceProp props_{};
  void* flush_ = nullptr;
  size_t flush_bytes_ = 0;
  int* sink_ = nullptr;
  CheckStats* stats_ = nullptr;
  float* max_ref_ = nullptr;
  arbiter::gemm_check::Scratch workspace_;  // the stream-K tiles' partials
  cudaEvent_t events_[kMaxVariants][2 * kMaxReps];
};

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  Bench bench(options);
  bench.PrintDevice();
  std::vector<std::string> rows;
  bool ok = true;
  for (WgmmaDType dtype : options.dtypes) ok &= bench.RunDType(dtype, &rows);
  std::printf("\n| dtype | M x N x K |");
  for (WgmmaTile tile : arbiter::wgmma::kAllWgmmaTiles) {
    std::printf(" wgmma %s us |", arbiter::wgmma::WgmmaTileName(tile));
  }
  std::printf(" cuBLAS us | best wgmma TFLOP/s | cuBLAS TFLOP/s | best wgmma / cuBLAS "
              "| wgmma worst err/tol |\n|---|---|");
  for (size_t i = 0; i < std::size(arbiter::wgmma::kAllWgmmaTiles); ++i) std::printf("---|");
  std::printf("---|---|---|---|---|\n");
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
  std::printf("\n%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
