// The wgmma_bt kernel and its launcher; wgmma_bt.h has the design and geometry.
#include "kernels/wgmma_bt/wgmma_bt.h"

#include <algorithm>
#include <atomic>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/hopper.cuh"
#include "kernels/wgmma_bt/token_mma.cuh"

namespace arbiter::kernels {
namespace {

using namespace hopper;  // mbarriers, TMA, clusters, wgmma descriptors and fences
using wgmma_bt::TokenMma;

// 64 16-bit elements = 128 bytes: one row of the 128B swizzle, the widest box
// TMA swizzles; four k16 wgmma steps per stage.
constexpr int kBlockK = 64;
constexpr int kMaxSplits = 8;  // portable cluster size
constexpr int kWeightBoxBytes = kBlockK * 64 * 2;  // 64 k-rows x 64 weight columns

// A CTA: `kConsumers` warpgroups of 64 weight columns each, then one producer
// warp (warpgroups must start at a warp index divisible by 4, so the producer
// goes last). Stage = kConsumers weight boxes, then the token box.
template <int kTokens_, int kConsumers_, int kStages_, int kCtasPerSm_>
struct BtConfig {
  static constexpr int kTokens = kTokens_;
  static constexpr int kConsumers = kConsumers_;
  static constexpr int kStages = kStages_;
  static constexpr int kCtasPerSm = kCtasPerSm_;
  static constexpr int kThreads = 128 * kConsumers + 32;
  static constexpr int kCols = 64 * kConsumers;
  static constexpr int kTokenBytes = kTokens * kBlockK * 2;  // 1024-aligned: tokens % 8 == 0
  static constexpr int kStageBytes = kConsumers * kWeightBoxBytes + kTokenBytes;
  // The f32 partial [token][column] reuses the ring once the main loop is
  // done; +4 floats a row keeps 16-byte rows and spreads a warp's stores
  // (token rows 2 apart, 8 columns) over all 32 banks.
  static constexpr int kRedStride = kCols + 4;
  static constexpr int kRedBytes = kTokens * kRedStride * 4;
  static constexpr int kRingBytes = kStages * kStageBytes;
  static constexpr int kDataBytes = kRingBytes > kRedBytes ? kRingBytes : kRedBytes;
  // Data, full and empty barriers, slack to align the base to 1024 bytes.
  static constexpr int kSmemBytes = kDataBytes + 2 * kStages * 8 + 1024;
  static_assert(kTokens % 8 == 0 && kTokens <= 256, "wgmma N and the TMA box");
  static_assert(kSmemBytes * kCtasPerSm <= 227 * 1024, "exceeds the shared memory of an SM");
};
// Stages hold >= 32 KB of weight in flight per SM, what DRAM latency times
// the per-SM share of bandwidth asks for, plus the token tiles re-read from L2.
using Bt32 = BtConfig<32, 1, 8, 2>;    // 12 KB stages, 2 CTAs an SM
using Bt64 = BtConfig<64, 1, 6, 2>;    // 16 KB stages, 2 CTAs an SM
using Bt128 = BtConfig<128, 2, 6, 1>;  // 32 KB stages
using Bt256 = BtConfig<256, 2, 4, 1>;  // 48 KB stages; 128 f32 accumulators a thread

// ---------------------------------------------------------------- device helpers

__device__ __forceinline__ void ConsumersBarrier(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}
__device__ __forceinline__ float4 LoadShared4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ void StoreShared(uint32_t addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}

// Four f32 rounded to the dtype, packed low element first.
template <bool kBf16>
__device__ __forceinline__ uint2 PackQuad(float4 v) {
  if constexpr (kBf16) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v.z, v.w);
    return make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  } else {
    const __half2 lo = __floats2half2_rn(v.x, v.y);
    const __half2 hi = __floats2half2_rn(v.z, v.w);
    return make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
}

// ---------------------------------------------------------------- the kernel

// Producer: one thread keeps the ring full; the stage's full barrier completes
// when its weight boxes and token box have landed.
// Weight boxes wholly past N are not loaded: their consumer's columns are
// never stored, and each column of C depends only on that column of B.
template <class Cfg>
__device__ __forceinline__ void Produce(const CUtensorMap* map_a, const CUtensorMap* map_b,
                                        uint32_t ring, uint32_t full_base, uint32_t empty_base,
                                        int n, int n0, int t0, int kb_begin, int kb_end) {
  const int boxes = min(Cfg::kConsumers, (n - n0 + 63) / 64);
  const uint32_t bytes = boxes * kWeightBoxBytes + Cfg::kTokenBytes;
  for (int kb = kb_begin, it = 0; kb < kb_end; ++kb, ++it) {
    const int s = it % Cfg::kStages;
    BarrierWait(empty_base + 8 * s, ((it / Cfg::kStages) & 1) ^ 1);
    const uint32_t full = full_base + 8 * s;
    const uint32_t stage = ring + s * Cfg::kStageBytes;
    BarrierExpectTx(full, bytes);
    for (int j = 0; j < boxes; ++j) {
      TmaLoad2d(stage + j * kWeightBoxBytes, map_b, full, n0 + 64 * j, kb * kBlockK);
    }
    TmaLoad2d(stage + Cfg::kConsumers * kWeightBoxBytes, map_a, full, kb * kBlockK, t0);
  }
}

// Consumer warpgroup `consumer`: its 64 weight columns x the token tile,
// accumulated over k-blocks [kb_begin, kb_end); one k-block of wgmma stays in
// flight while the previous stage goes back to the producer.
template <class Cfg, bool kBf16>
__device__ __forceinline__ void Consume(float (&acc)[Cfg::kTokens / 2], uint32_t ring,
                                        uint32_t full_base, uint32_t empty_base, int consumer,
                                        int lane, int kb_begin, int kb_end) {
  for (int kb = kb_begin, it = 0; kb < kb_end; ++kb, ++it) {
    const int s = it % Cfg::kStages;
    BarrierWait(full_base + 8 * s, (it / Cfg::kStages) & 1);
    const uint32_t stage = ring + s * Cfg::kStageBytes;
    const uint32_t weights = stage + consumer * kWeightBoxBytes;
    const uint32_t tokens = stage + Cfg::kConsumers * kWeightBoxBytes;
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      // k16 step: +16 k-rows (2048 bytes) down the weight box (MN-major, one
      // 64-column swizzle atom, so LBO is unused); +32 bytes along the token
      // box's swizzled 128-byte rows (K-major).
      const uint64_t desc_w = SmemDesc(weights + 2048 * kk, kWeightBoxBytes, 1024);
      const uint64_t desc_t = SmemDesc(tokens + 32 * kk, 16, 1024);
      TokenMma<Cfg::kTokens>::template Run<kBf16>(acc, desc_w, desc_t,
                                                  (it != 0 || kk != 0) ? 1u : 0u);
    }
    WgmmaCommit();
    if (it > 0) {
      WgmmaWait<1>();
      if (lane == 0) BarrierArrive(empty_base + 8 * ((it - 1) % Cfg::kStages));
    }
  }
  WgmmaWait<0>();
  FenceAccumulators(acc);
}

// Rows [row_lo, row_hi) of the tile: the ranks' partials added in rank order,
// rounded, stored 4 columns (8 bytes) a thread, consecutive threads along a row.
template <class Cfg, bool kBf16>
__device__ __forceinline__ void StoreRows(uint32_t red, int splits, int row_lo, int row_hi, int t0,
                                          int n0, int m, int n, uint16_t* __restrict__ c) {
  constexpr int kQuads = Cfg::kCols / 4;
  for (int idx = threadIdx.x; idx < (row_hi - row_lo) * kQuads; idx += Cfg::kThreads) {
    const int row = row_lo + idx / kQuads;
    const int quad = idx % kQuads;
    const int gcol = n0 + 4 * quad;
    if (gcol >= n) continue;  // N % 8 == 0: a quad starting inside C lies wholly inside
    const uint32_t at = red + (row * Cfg::kRedStride + 4 * quad) * 4;
    float4 sum;
    if (splits == 1) {
      sum = LoadShared4(at);
    } else {
      sum = LoadCluster4(MapRank(at, 0));
      for (int q = 1; q < splits; ++q) {
        const float4 v = LoadCluster4(MapRank(at, q));
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
      }
    }
    const int64_t grow = t0 + row;
    *reinterpret_cast<uint2*>(c + grow * n + gcol) = PackQuad<kBf16>(sum);
  }
}

template <class Cfg, bool kBf16>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kCtasPerSm)
    WgmmaBtKernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                  int m, int n, int k, uint16_t* __restrict__ c, int splits, int kb_per_split) {
  extern __shared__ uint8_t smem_raw[];
  // The 128B swizzle repeats every 1024 bytes; descriptors assume stages on it.
  const uint32_t ring = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const uint32_t full_base = ring + Cfg::kDataBytes;
  const uint32_t empty_base = full_base + 8 * Cfg::kStages;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      BarrierInit(full_base + 8 * s, 1);                            // the producer's expect_tx
      BarrierInit(empty_base + 8 * s, 4 * Cfg::kConsumers);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();

  const int rank = static_cast<int>(blockIdx.x) % splits;
  const int n0 = static_cast<int>(blockIdx.x) / splits * Cfg::kCols;
  const int t0 = static_cast<int>(blockIdx.y) * Cfg::kTokens;
  const int k_blocks = (k + kBlockK - 1) / kBlockK;
  const int kb_begin = rank * kb_per_split;
  const int kb_end = min(k_blocks, kb_begin + kb_per_split);

  if (warp == 4 * Cfg::kConsumers) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
      Produce<Cfg>(&map_a, &map_b, ring, full_base, empty_base, n, n0, t0, kb_begin, kb_end);
    }
    __syncwarp();
  } else {
    const int consumer = warp / 4;
    float acc[Cfg::kTokens / 2];
#pragma unroll
    for (int i = 0; i < Cfg::kTokens / 2; ++i) acc[i] = 0.0f;
    Consume<Cfg, kBf16>(acc, ring, full_base, empty_base, consumer, lane, kb_begin, kb_end);
    // Every consumer's wgmma has finished reading the ring (and every TMA
    // write has landed: each stage's full barrier was waited on) before the
    // partial overwrites it. Accumulator layout (m64nN): this thread holds
    // weight columns r and r + 8 (r = 16 * (warp % 4) + lane / 4) and, in each
    // 8-token chunk j, tokens 8j + 2 (lane % 4) and + 1.
    ConsumersBarrier(128 * Cfg::kConsumers);
    const int col = 64 * consumer + 16 * (warp % 4) + lane / 4;
#pragma unroll
    for (int j = 0; j < Cfg::kTokens / 8; ++j) {
      const int token = 8 * j + 2 * (lane % 4);
      const uint32_t at = ring + (token * Cfg::kRedStride + col) * 4;
      StoreShared(at, acc[4 * j]);
      StoreShared(at + Cfg::kRedStride * 4, acc[4 * j + 1]);
      StoreShared(at + 8 * 4, acc[4 * j + 2]);
      StoreShared(at + (Cfg::kRedStride + 8) * 4, acc[4 * j + 3]);
    }
  }
  // Every rank's partial is in (release/acquire at cluster scope).
  if (splits > 1) {
    ClusterSync();
  } else {
    __syncthreads();
  }
  // Rank q adds and stores its share of the tile's live token rows.
  const int rows = min(Cfg::kTokens, m - t0);
  const int share = (rows + splits - 1) / splits;
  const int row_lo = min(rows, rank * share);
  const int row_hi = min(rows, row_lo + share);
  StoreRows<Cfg, kBf16>(ring, splits, row_lo, row_hi, t0, n0, m, n, c);
  // No CTA leaves while another still reads its partial.
  if (splits > 1) ClusterSync();
}

// ---------------------------------------------------------------- host side

// Raises the kernel's dynamic shared-memory limit once per device.
template <class Cfg, bool kBf16>
cudaError_t EnsureSmemLimit() {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < kMaxDevices && done[device].load(std::memory_order_acquire)) return cudaSuccess;
  err = cudaFuncSetAttribute(WgmmaBtKernel<Cfg, kBf16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             Cfg::kSmemBytes);
  if (err == cudaSuccess && device < kMaxDevices) done[device].store(true, std::memory_order_release);
  return err;
}

template <class Cfg, bool kBf16>
cudaError_t LaunchConfig(const LaunchArgs& args, const WgmmaBtPlan& plan, cudaStream_t stream) {
  cudaError_t err = EnsureSmemLimit<Cfg, kBf16>();
  if (err != cudaSuccess) return err;
  CUtensorMap map_a, map_b;
  const bool bf16 = args.dtype == DType::kBF16;
  err = EncodeTensorMap16(&map_a, bf16, args.a, args.k, args.m, kBlockK, Cfg::kTokens);
  if (err != cudaSuccess) return err;
  err = EncodeTensorMap16(&map_b, bf16, args.b, args.n, args.k, 64, kBlockK);
  if (err != cudaSuccess) return err;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(plan.grid_x()), static_cast<unsigned>(plan.token_tiles));
  config.blockDim = dim3(Cfg::kThreads);
  config.dynamicSmemBytes = Cfg::kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute cluster[1];
  cluster[0].id = cudaLaunchAttributeClusterDimension;
  cluster[0].val.clusterDim.x = static_cast<unsigned>(plan.splits);
  cluster[0].val.clusterDim.y = 1;
  cluster[0].val.clusterDim.z = 1;
  config.attrs = cluster;
  config.numAttrs = plan.splits > 1 ? 1 : 0;  // one CTA per strip: no cluster
  err = cudaLaunchKernelEx(&config, WgmmaBtKernel<Cfg, kBf16>, map_a, map_b, static_cast<int>(args.m),
                           static_cast<int>(args.n), static_cast<int>(args.k),
                           static_cast<uint16_t*>(args.c), plan.splits, plan.kb_per_split);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

template <bool kBf16>
cudaError_t LaunchDType(const LaunchArgs& args, const WgmmaBtPlan& plan, cudaStream_t stream) {
  switch (plan.tokens) {
    case Bt32::kTokens:
      return LaunchConfig<Bt32, kBf16>(args, plan, stream);
    case Bt64::kTokens:
      return LaunchConfig<Bt64, kBf16>(args, plan, stream);
    case Bt128::kTokens:
      return LaunchConfig<Bt128, kBf16>(args, plan, stream);
    case Bt256::kTokens:
      return LaunchConfig<Bt256, kBf16>(args, plan, stream);
  }
  return cudaErrorInvalidValue;
}

template <class Cfg>
void Describe(WgmmaBtPlan* plan) {
  plan->tokens = Cfg::kTokens;
  plan->consumers = Cfg::kConsumers;
  plan->stages = Cfg::kStages;
  plan->ctas_per_sm = Cfg::kCtasPerSm;
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

cudaError_t LaunchPlanned(const LaunchArgs& args, cudaStream_t stream) {
  return LaunchWgmmaBt(args, stream, 0);
}

}  // namespace

WgmmaBtPlan MakeWgmmaBtPlan(int64_t m, int64_t n, int64_t k, int sm_count, int force_splits) {
  WgmmaBtPlan plan;
  // The smallest token tile that holds M (past 256 rows, 256-row tiles).
  if (m <= 32) {
    Describe<Bt32>(&plan);
  } else if (m <= 64) {
    Describe<Bt64>(&plan);
  } else if (m <= 128) {
    Describe<Bt128>(&plan);
  } else {
    Describe<Bt256>(&plan);
  }
  plan.strips = static_cast<int>(CeilDiv(n, 64 * plan.consumers));
  plan.token_tiles = static_cast<int>(CeilDiv(m, plan.tokens));
  const int k_blocks = static_cast<int>(CeilDiv(k, kBlockK));
  const int64_t slots = int64_t{std::max(sm_count, 1)} * plan.ctas_per_sm;
  const int64_t tiles = int64_t{plan.strips} * plan.token_tiles;
  // A split count s is valid when every rank gets k-blocks. Cost: waves of
  // CTAs over the SMs' slots times the k-blocks each walks, plus two k-blocks'
  // worth per CTA for filling the ring and adding the partials; a tie keeps
  // fewer splits.
  int64_t best = -1;
  const int wanted = force_splits > 0 ? std::min(force_splits, kMaxSplits) : 0;
  for (int s = 1; s <= kMaxSplits && s <= k_blocks; ++s) {
    const int per = (k_blocks + s - 1) / s;
    if ((k_blocks + per - 1) / per != s) continue;
    const int64_t waves = (tiles * s + slots - 1) / slots;
    const int64_t cost = waves * (per + 2);
    const bool take = wanted > 0 ? s <= wanted : (best < 0 || cost < best);
    if (take) {
      best = cost;
      plan.splits = s;
      plan.kb_per_split = per;
    }
  }
  return plan;
}

const char* WgmmaBtUnsupportedReason(const LaunchArgs& args) {
  if (!DimsInRange(args)) return "M, N and K must be in [1, 2^31)";
  if (args.dtype != DType::kF16 && args.dtype != DType::kBF16) return "dtype must be f16 or bf16";
  if (args.k % 8 != 0) return "K must be a multiple of 8 (TMA needs 16-byte row strides for A)";
  if (args.n % 8 != 0) return "N must be a multiple of 8 (TMA needs 16-byte row strides for B)";
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) return "null operand";
  if (!Aligned(args.a) || !Aligned(args.b) || !Aligned(args.c)) {
    return "A, B and C must be 16-byte aligned for TMA";
  }
  // Token tiles go along grid.y (at most 65535).
  if (CeilDiv(args.m, 256) > 65535) return "M exceeds 65535 tiles of 256 rows";
  return nullptr;
}

cudaError_t LaunchWgmmaBt(const LaunchArgs& args, cudaStream_t stream, int force_splits) {
  if (WgmmaBtUnsupportedReason(args) != nullptr) return cudaErrorInvalidValue;
  const WgmmaBtPlan plan = MakeWgmmaBtPlan(args.m, args.n, args.k, args.sm_count, force_splits);
  return args.dtype == DType::kBF16 ? LaunchDType<true>(args, plan, stream)
                                    : LaunchDType<false>(args, plan, stream);
}

const Launcher kWgmmaBt = {"LaunchWgmmaBt", LaunchPlanned, nullptr, WgmmaBtUnsupportedReason};

}  // namespace arbiter::kernels
