#include "backends/cuda/device_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace arbiter::cuda {
namespace {

template <typename Bits>
__global__ void FillKernel(Bits* data, Bits pattern, size_t count) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    data[i] = pattern;
  }
}

template <typename Bits>
cudaError_t Fill(void* data, uint64_t pattern, size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const int threads = 256;
  const size_t wanted = (count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < 8192 ? wanted : 8192);
  FillKernel<Bits><<<blocks, threads, 0, stream>>>(static_cast<Bits*>(data),
                                                  static_cast<Bits>(pattern), count);
  return cudaGetLastError();
}

// engine/random_fill.h's SplitMix64, bit for bit (a GPU test compares the fills).
__device__ __forceinline__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i is table[SplitMix64(key + i) & 0xffff], its sign bit flipped by bit
// 16 of the hash: the host's FillRandom past its table size. The 2^16-entry
// table (128-512 KiB) stays in L2; each element is one hash and one gather.
template <typename Bits>
__global__ void FillFromTableKernel(Bits* data, const Bits* table, uint64_t key, size_t count) {
  constexpr Bits kSign = Bits{1} << (8 * sizeof(Bits) - 1);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t h = SplitMix64(key + i);
    data[i] = table[h & 0xffff] ^ (((h >> 16) & 1) ? kSign : Bits{0});
  }
}

template <typename Bits>
cudaError_t FillFromTable(void* data, const void* table, uint64_t key, size_t count,
                          cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const int threads = 256;
  const size_t wanted = (count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < 8192 ? wanted : 8192);
  FillFromTableKernel<Bits><<<blocks, threads, 0, stream>>>(
      static_cast<Bits*>(data), static_cast<const Bits*>(table), key, count);
  return cudaGetLastError();
}

template <DeviceElem E>
__device__ __forceinline__ double Load(const void* p, int64_t i) {
  if constexpr (E == DeviceElem::kF32) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (E == DeviceElem::kF64) {
    return static_cast<const double*>(p)[i];
  } else if constexpr (E == DeviceElem::kF16) {
    return __half2float(static_cast<const __half*>(p)[i]);
  } else {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

constexpr int kTile = 64;      // C tile edge per block
constexpr int kTileK = 16;     // K slice staged per step
constexpr int kThreads = 256;  // 16 x 16 threads, 4 x 4 outputs each

// Each thread owns outputs (ty + 16*i, tx + 16*j): a warp reads 16 consecutive
// doubles of a B row and 2 broadcast A values per step, so shared loads do not
// conflict. The reduction over K is a fixed serial order per element.
// Output row r (of m) is row rows[r] of A and C when `rows` is set (the sampled
// check), row r itself when it is null.
template <DeviceElem E>
__global__ void __launch_bounds__(kThreads)
    ReferenceKernel(const void* a, const void* b, const int64_t* rows, double* ref, int64_t m,
                    int64_t n, int64_t k) {
  __shared__ double as[kTileK][kTile];  // A tile, K-major
  __shared__ double bs[kTileK][kTile];
  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
  const int64_t row0 = int64_t{blockIdx.y} * kTile;
  const int64_t col0 = int64_t{blockIdx.x} * kTile;
  double acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    for (int e = threadIdx.x; e < kTile * kTileK; e += kThreads) {
      // A: 64 rows x 16 k; consecutive threads walk k so global reads coalesce along a row.
      const int ar = e / kTileK, ak = e % kTileK;
      const int64_t gr = row0 + ar, gk = k0 + ak;
      const int64_t ga = gr < m ? (rows != nullptr ? rows[gr] : gr) : 0;
      as[ak][ar] = (gr < m && gk < k) ? Load<E>(a, ga * k + gk) : 0.0;
      // B: 16 k x 64 cols; consecutive threads walk columns.
      const int bk = e / kTile, bc = e % kTile;
      const int64_t hk = k0 + bk, hc = col0 + bc;
      bs[bk][bc] = (hk < k && hc < n) ? Load<E>(b, hk * n + hc) : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      double av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      if (r < m && c < n) ref[r * n + c] = acc[i][j];
    }
  }
}

// Inf and NaN are the encodings whose exponent bits are all ones.
template <typename Bits, Bits kExponent>
__global__ void CountNonFiniteKernel(const Bits* data, size_t count, unsigned long long* counter) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    mine += (data[i] & kExponent) == kExponent;
  }
  for (int offset = 16; offset > 0; offset /= 2) mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if (threadIdx.x % 32 == 0 && mine > 0) atomicAdd(counter, mine);
}

template <typename Bits>
__global__ void CountDifferencesKernel(const Bits* x, const Bits* y, size_t count,
                                       unsigned long long* counter) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    mine += x[i] != y[i];
  }
  for (int offset = 16; offset > 0; offset /= 2) mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if (threadIdx.x % 32 == 0 && mine > 0) atomicAdd(counter, mine);
}

// Grid for a grid-stride pass over `count` elements: enough blocks to fill the
// device a few times over, no more.
unsigned PassBlocks(size_t count, int threads) {
  const size_t wanted = (count + threads - 1) / threads;
  return static_cast<unsigned>(wanted < 4096 ? (wanted > 0 ? wanted : 1) : 4096);
}

template <DeviceElem E>
cudaError_t Reference(const void* a, const void* b, const int64_t* rows, double* ref, int64_t m,
                      int64_t n, int64_t k, cudaStream_t stream) {
  if (m <= 0 || n <= 0 || k <= 0) return cudaErrorInvalidValue;
  const int64_t tiles_m = (m + kTile - 1) / kTile;
  const int64_t tiles_n = (n + kTile - 1) / kTile;
  if (tiles_m > 65535 || tiles_n > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m));
  ReferenceKernel<E><<<grid, kThreads, 0, stream>>>(a, b, rows, ref, m, n, k);
  return cudaGetLastError();
}

cudaError_t ReferenceOf(DeviceElem elem, const void* a, const void* b, const int64_t* rows,
                        double* ref, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  switch (elem) {
    case DeviceElem::kF32: return Reference<DeviceElem::kF32>(a, b, rows, ref, m, n, k, stream);
    case DeviceElem::kF64: return Reference<DeviceElem::kF64>(a, b, rows, ref, m, n, k, stream);
    case DeviceElem::kF16: return Reference<DeviceElem::kF16>(a, b, rows, ref, m, n, k, stream);
    case DeviceElem::kBF16: return Reference<DeviceElem::kBF16>(a, b, rows, ref, m, n, k, stream);
  }
  return cudaErrorInvalidValue;
}

__global__ void ReadFlushKernel(const uint4* __restrict__ p, int64_t count, unsigned never,
                                unsigned* sink) {
  unsigned x = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == never) *sink = x;
}

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void HoldKernel(const volatile unsigned* open, unsigned generation, uint64_t limit_ns,
                           volatile unsigned* expired) {
  const uint64_t start = GlobalTimerNs();
  while (*open != generation) {
    if (GlobalTimerNs() - start > limit_ns) {
      *expired = generation;
      return;
    }
    __nanosleep(256);
  }
}

}  // namespace

cudaError_t LaunchReadFlush(const void* data, size_t bytes, unsigned never, unsigned* sink,
                            int blocks, cudaStream_t stream) {
  if (bytes % sizeof(uint4) != 0 || blocks < 1) return cudaErrorInvalidValue;
  ReadFlushKernel<<<blocks, 512, 0, stream>>>(static_cast<const uint4*>(data),
                                              static_cast<int64_t>(bytes / sizeof(uint4)), never,
                                              sink);
  return cudaGetLastError();
}

cudaError_t LaunchHold(const volatile unsigned* open, unsigned generation, uint64_t limit_ns,
                       volatile unsigned* expired, cudaStream_t stream) {
  HoldKernel<<<1, 1, 0, stream>>>(open, generation, limit_ns, expired);
  return cudaGetLastError();
}

cudaError_t LaunchFill(void* data, int elem_bytes, uint64_t nan_bits, size_t count,
                       cudaStream_t stream) {
  switch (elem_bytes) {
    case 2: return Fill<uint16_t>(data, nan_bits, count, stream);
    case 4: return Fill<uint32_t>(data, nan_bits, count, stream);
    case 8: return Fill<unsigned long long>(data, nan_bits, count, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchFillFromTable(void* data, int elem_bytes, const void* table, uint64_t key,
                                size_t count, cudaStream_t stream) {
  switch (elem_bytes) {
    case 2: return FillFromTable<uint16_t>(data, table, key, count, stream);
    case 4: return FillFromTable<uint32_t>(data, table, key, count, stream);
    case 8: return FillFromTable<unsigned long long>(data, table, key, count, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchReference(DeviceElem elem, const void* a, const void* b, double* ref, int64_t m,
                            int64_t n, int64_t k, cudaStream_t stream) {
  return ReferenceOf(elem, a, b, nullptr, ref, m, n, k, stream);
}

cudaError_t LaunchReferenceRows(DeviceElem elem, const void* a, const void* b,
                                const int64_t* rows, int64_t row_count, double* ref, int64_t n,
                                int64_t k, cudaStream_t stream) {
  if (rows == nullptr) return cudaErrorInvalidValue;
  return ReferenceOf(elem, a, b, rows, ref, row_count, n, k, stream);
}

cudaError_t LaunchCountNonFinite(DeviceElem elem, const void* data, size_t count,
                                 unsigned long long* counter, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const int threads = 256;
  const unsigned blocks = PassBlocks(count, threads);
  switch (elem) {
    case DeviceElem::kF32:
      CountNonFiniteKernel<uint32_t, 0x7f800000u><<<blocks, threads, 0, stream>>>(
          static_cast<const uint32_t*>(data), count, counter);
      break;
    case DeviceElem::kF64:
      CountNonFiniteKernel<unsigned long long, 0x7ff0000000000000ull><<<blocks, threads, 0, stream>>>(
          static_cast<const unsigned long long*>(data), count, counter);
      break;
    case DeviceElem::kF16:
      CountNonFiniteKernel<uint16_t, uint16_t{0x7c00}><<<blocks, threads, 0, stream>>>(
          static_cast<const uint16_t*>(data), count, counter);
      break;
    case DeviceElem::kBF16:
      CountNonFiniteKernel<uint16_t, uint16_t{0x7f80}><<<blocks, threads, 0, stream>>>(
          static_cast<const uint16_t*>(data), count, counter);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchCountDifferences(int elem_bytes, const void* x, const void* y, size_t count,
                                   unsigned long long* counter, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const int threads = 256;
  const unsigned blocks = PassBlocks(count, threads);
  switch (elem_bytes) {
    case 2:
      CountDifferencesKernel<uint16_t><<<blocks, threads, 0, stream>>>(
          static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(y), count, counter);
      break;
    case 4:
      CountDifferencesKernel<uint32_t><<<blocks, threads, 0, stream>>>(
          static_cast<const uint32_t*>(x), static_cast<const uint32_t*>(y), count, counter);
      break;
    case 8:
      CountDifferencesKernel<unsigned long long><<<blocks, threads, 0, stream>>>(
          static_cast<const unsigned long long*>(x), static_cast<const unsigned long long*>(y),
          count, counter);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace arbiter::cuda
