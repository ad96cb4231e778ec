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
template <DeviceElem E>
__global__ void __launch_bounds__(kThreads)
    ReferenceKernel(const void* a, const void* b, double* ref, int64_t m, int64_t n, int64_t k) {
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
      as[ak][ar] = (gr < m && gk < k) ? Load<E>(a, gr * k + gk) : 0.0;
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

}  // namespace

cudaError_t LaunchFill(void* data, int elem_bytes, uint64_t nan_bits, size_t count,
                       cudaStream_t stream) {
  switch (elem_bytes) {
    case 2: return Fill<uint16_t>(data, nan_bits, count, stream);
    case 4: return Fill<uint32_t>(data, nan_bits, count, stream);
    case 8: return Fill<unsigned long long>(data, nan_bits, count, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchReference(DeviceElem elem, const void* a, const void* b, double* ref, int64_t m,
                            int64_t n, int64_t k, cudaStream_t stream) {
  if (m <= 0 || n <= 0 || k <= 0) return cudaErrorInvalidValue;
  const int64_t tiles_m = (m + kTile - 1) / kTile;
  const int64_t tiles_n = (n + kTile - 1) / kTile;
  if (tiles_m > 65535 || tiles_n > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m));
  switch (elem) {
    case DeviceElem::kF32:
      ReferenceKernel<DeviceElem::kF32><<<grid, kThreads, 0, stream>>>(a, b, ref, m, n, k);
      break;
    case DeviceElem::kF64:
      ReferenceKernel<DeviceElem::kF64><<<grid, kThreads, 0, stream>>>(a, b, ref, m, n, k);
      break;
    case DeviceElem::kF16:
      ReferenceKernel<DeviceElem::kF16><<<grid, kThreads, 0, stream>>>(a, b, ref, m, n, k);
      break;
    case DeviceElem::kBF16:
      ReferenceKernel<DeviceElem::kBF16><<<grid, kThreads, 0, stream>>>(a, b, ref, m, n, k);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace arbiter::cuda
