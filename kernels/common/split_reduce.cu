#include "kernels/common/split_reduce.h"

#include <algorithm>
#include <cstdint>

#include "kernels/common/launch_args.h"
#include "kernels/common/storage.cuh"

namespace arbiter::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kWarpReduceSplits = 32;  // from this many splits, a warp per element

template <bool kBf16>
__global__ void __launch_bounds__(kThreads)
    SplitReduceKernel(const float* __restrict__ partials, uint16_t* __restrict__ c, int64_t mn,
                      int splits) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < mn;
       i += int64_t{gridDim.x} * kThreads) {
    float sum = partials[i];
    for (int s = 1; s < splits; ++s) sum += partials[s * mn + i];
    c[i] = ToStorage<kBf16>(sum);
  }
}

template <bool kBf16>
__global__ void __launch_bounds__(kThreads)
    SplitReduceWarpKernel(const float* __restrict__ partials, uint16_t* __restrict__ c, int64_t mn,
                          int splits) {
  const int lane = threadIdx.x % 32;
  for (int64_t i = (blockIdx.x * int64_t{kThreads} + threadIdx.x) / 32; i < mn;
       i += int64_t{gridDim.x} * kWarpsPerBlock) {
    float sum = 0.f;
    for (int s = lane; s < splits; s += 32) sum += partials[s * mn + i];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0) c[i] = ToStorage<kBf16>(sum);
  }
}

template <bool kBf16>
cudaError_t Launch(const float* partials, int64_t mn, int splits, uint16_t* c,
                   cudaStream_t stream) {
  if (splits >= kWarpReduceSplits) {
    const int64_t blocks = std::min<int64_t>(CeilDiv(mn, kWarpsPerBlock), int64_t{1} << 16);
    SplitReduceWarpKernel<kBf16>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(partials, c, mn, splits);
  } else {
    const int64_t blocks = std::min<int64_t>(CeilDiv(mn, kThreads), int64_t{1} << 20);
    SplitReduceKernel<kBf16>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(partials, c, mn, splits);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchSplitReduce(DType dtype, const float* partials, int64_t mn, int splits, void* c,
                              cudaStream_t stream) {
  auto* out = static_cast<uint16_t*>(c);
  switch (dtype) {
    case DType::kF16:
      return Launch<false>(partials, mn, splits, out, stream);
    case DType::kBF16:
      return Launch<true>(partials, mn, splits, out, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace arbiter::kernels
