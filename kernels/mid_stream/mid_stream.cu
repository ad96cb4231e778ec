// mid_stream (mid_stream.h has the design, the launch geometry and the
// determinism argument).
//
// The stream: a CTA walks its run of units through a ring of kStages slots in
// shared memory filled by cp.async (kStages - 1 in flight while one is
// computed; one __syncthreads per unit). A unit is 32 k rows of a strip: each
// lane copies 16 bytes, so one warp copy instruction covers a whole 512-byte
// run of a k row (1 KiB rows for 512-column strips), the copies bypass L1, and
// B's carry an L2 evict-first hint (read once). The ring is as deep as ~216 KiB
// of shared memory allows (8-11 slots at 256 columns): 112-160 KiB of B in
// flight an SM, past the ~32 KiB a DRAM latency needs at 1/132 of 4.3 TB/s.
// Row r's 16-byte chunks are XOR-swizzled by r % 8 so that the 8 row addresses
// of an ldmatrix.trans hit 8 bank groups; A's 32 k values per token sit in
// 80-byte rows (64 + 16 padding) for the same reason.
//
// A unit boundary that ends a strip (or the CTA's run) flushes the
// accumulators: to C when the CTA walked the whole strip, else to its
// workspace slot (slot 2c for the run's first strip, 2c + 1 for its last; only
// those two can be shared), then a per-strip arrival counter picks the last
// CTA, which adds slots in CTA order (its own from registers, in its place)
// and resets the counter. The loads of the next units are in flight meanwhile.

#include "kernels/mid_stream/mid_stream.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/common/mma_sync.cuh"
#include "kernels/common/stream_counters.h"
#include "kernels/common/storage.cuh"
#include "kernels/common/tile_mainloop.cuh"

namespace arbiter::kernels {
namespace {

using mma_tile::CpAsyncCommit;
using mma_tile::CpAsyncWait;
using mma_tile::LdMatrixX4;
using mma_tile::LdMatrixX4Trans;
using mma_tile::SmemAddress;

constexpr int kRows = 32;           // k rows per unit (two k16 steps)
constexpr int kARowBytes = 80;      // one token's 32 k values + 16 bytes of padding
constexpr int kRingBudget = 216 * 1024;  // shared memory for the ring (227 KiB the most a CTA gets)
constexpr int kMaxStages = 12;
// Arrival counters per stream: one per strip.
constexpr int kMaxStrips = 1 << 16;

template <int kCols, int TG>
struct Tile {
  static constexpr int kTokens = 8 * TG;
  static constexpr int kBBytes = kRows * kCols * 2;
  static constexpr int kABytes = kTokens * kARowBytes;
  static constexpr int kStageBytes = kBBytes + kABytes;
  static constexpr int kFit = kRingBudget / kStageBytes;
  static constexpr int kStages = kFit > kMaxStages ? kMaxStages : kFit;
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static_assert(kCols % 128 == 0);
  static_assert(kStages >= 3);
  static_assert(kStageBytes % 128 == 0);
};

struct Params {
  const uint16_t* a;
  const uint16_t* b;
  uint16_t* c;
  float* partials;     // 2 slots of m x columns floats per CTA
  unsigned* arrivals;  // one per strip, zero on entry and on exit
  int m, n, k;
  int upc;    // units per strip: ceil(k / 32)
  int units;  // strips x upc
  int ctas;   // gridDim.x
};

// First unit of CTA c (c = ctas: one past the last unit).
__device__ __forceinline__ int UnitBegin(int c, const Params& p) {
  return static_cast<int>(static_cast<int64_t>(c) * p.units / p.ctas);
}
// The CTA whose run holds unit u: the largest c with UnitBegin(c) <= u.
__device__ __forceinline__ int Owner(int u, const Params& p) {
  return static_cast<int>((static_cast<int64_t>(u + 1) * p.ctas + p.units - 1) / p.units) - 1;
}

__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
// 16-byte global->shared copy, L1 bypassed; ok == false writes zeros and reads
// nothing (src must still be a valid address).
__device__ __forceinline__ void CopyStream16(uint32_t dst, const void* src, bool ok,
                                             uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(dst),
               "l"(src), "r"(ok ? 16 : 0), "l"(policy)
               : "memory");
}

// kCols columns a strip, TG groups of 8 tokens a CTA, kTS warps per 32 columns
// (each with TG / kTS groups).
template <bool kBf16, int TG, int kCols, int kTS>
__global__ void __launch_bounds__(kCols * kTS, 1) MidStreamKernel(const Params p) {
  using T = Tile<kCols, TG>;
  constexpr int kStages = T::kStages;
  constexpr int kThreads = kCols * kTS;
  constexpr int kColWarps = kCols / 32;
  constexpr int kWG = TG / kTS;  // token groups a warp computes
  static_assert(kWG % 2 == 0, "token groups are computed in pairs");
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int last_arrival;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int cw = warp % kColWarps;         // the warp's 32 columns of the strip
  const int tg0 = (warp / kColWarps) * kWG;  // the warp's first token group
  const int cta = blockIdx.x;
  const int u0 = UnitBegin(cta, p);
  const int u1 = UnitBegin(cta + 1, p);
  const int steps = u1 - u0;
  // Token groups wholly past M are neither copied nor computed; groups are
  // computed in pairs, so an odd live count copies (zeros) one more.
  const int live_groups = min(TG, (p.m + 7) / 8);
  const int a_groups = min(TG, (live_groups + 1) / 2 * 2);
  const uint32_t ring = SmemAddress(smem);
  const uint64_t policy = EvictFirstPolicy();

  float acc[2][kWG][4];
  auto zero = [&] {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int t = 0; t < kWG; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[j][t][i] = 0.f;
      }
    }
  };
  zero();

  // B copies: a pass of the CTA covers kRowsPerPass rows, thread x copies
  // 16-byte chunk `bchunk` of rows r0, r0 + kRowsPerPass, ...
  constexpr int kPerRow = kCols / 8;
  constexpr int kRowsPerPass = kThreads / kPerRow;
  constexpr int kPerThread = kRows / kRowsPerPass;
  static_assert(kPerThread * kRowsPerPass == kRows);
  const int r0 = threadIdx.x / kPerRow;
  const int bchunk = threadIdx.x % kPerRow;
  constexpr int kAPerThread = (TG * 32 + kThreads - 1) / kThreads;  // 16-byte A chunks

  // Unit u0 + i into slot i % kStages: B rows of the unit's strip, and A's 32
  // k values there for each copied token. K % 8 == 0 and N % 8 == 0, so a
  // 16-byte chunk is wholly inside or outside the matrix.
  auto issue = [&](int i) {
    const int u = u0 + i;
    const int s = u / p.upc;
    const int krow0 = (u - s * p.upc) * kRows;
    const int col = s * kCols + bchunk * 8;
    const uint32_t sb = ring + (i % kStages) * T::kStageBytes;
    const uint32_t sa = sb + T::kBBytes;
    const bool col_ok = col < p.n;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int r = r0 + j * kRowsPerPass;
      const bool ok = col_ok && krow0 + r < p.k;
      const uint32_t dst = sb + r * (kCols * 2) + ((bchunk ^ (r % 8)) * 16);
      const uint16_t* src = ok ? p.b + (static_cast<int64_t>(krow0 + r) * p.n + col) : p.b;
      CopyStream16(dst, src, ok, policy);
    }
#pragma unroll
    for (int j = 0; j < kAPerThread; ++j) {
      const int e = threadIdx.x + j * kThreads;
      if (e >= a_groups * 32) break;
      const int t = e / 4, q = e % 4;
      const bool ok = t < p.m && krow0 + 8 * q < p.k;
      const uint16_t* src = ok ? p.a + (static_cast<int64_t>(t) * p.k + krow0 + 8 * q) : p.a;
      mma_tile::CpAsync16(sa + t * kARowBytes + q * 16, src, ok ? 16 : 0);
    }
  };

  // The unit in `slot`: two k16 steps over the warp's two n16 tiles and its
  // token groups.
  auto compute = [&](int slot) {
    const uint32_t sb = ring + slot * T::kStageBytes;
    const uint32_t sa = sb + T::kBBytes;
    // ldmatrix.x4.trans: lanes 8q .. 8q + 7 address matrix q's 8 k rows; matrix
    // q holds columns (q % 2) * 8 .. + 7 and k (q / 2) * 8 .. + 7 of the tile:
    // the a0a1, a2a3, a4a5, a6a7 fragments of B^T.
    const int q = lane / 8, rr = lane % 8;
    uint32_t bfrag[2][2][4];  // [k16 step][n16 tile]
#pragma unroll
    for (int s = 0; s < 2; ++s) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int r = s * 16 + (q / 2) * 8 + rr;
        const int chunk = cw * 4 + j * 2 + q % 2;
        LdMatrixX4Trans(bfrag[s][j], sb + r * (kCols * 2) + ((chunk ^ rr) * 16));
      }
    }
    // ldmatrix.x4: matrix q = tokens of group t + q / 2 at k 16s + 8 (q % 2):
    // registers {0, 1} are group t's b0b1, b2b3 of step s, {2, 3} group t + 1's.
    // Step 0 over every group, then step 1: an accumulator's two mma are
    // 2 * kWG instructions apart.
#pragma unroll
    for (int s = 0; s < 2; ++s) {
#pragma unroll
      for (int lt = 0; lt < kWG; lt += 2) {
        const int t = tg0 + lt;
        if (t >= live_groups) break;
        uint32_t afrag[4];
        LdMatrixX4(afrag, sa + ((t + q / 2) * 8 + rr) * kARowBytes + s * 32 + (q % 2) * 16);
        const uint32_t b0[2] = {afrag[0], afrag[1]};
        const uint32_t b1[2] = {afrag[2], afrag[3]};
#pragma unroll
        for (int j = 0; j < 2; ++j) Mma16816<kBf16>(acc[j][lt], bfrag[s][j], b0);
#pragma unroll
        for (int j = 0; j < 2; ++j) Mma16816<kBf16>(acc[j][lt + 1], bfrag[s][j], b1);
      }
    }
  };

  // D fragment (tile j, local group lt): d0, d1 = column 32 cw + 16j + g,
  // tokens 8 (tg0 + lt) + 2cq, + 1; d2, d3 = the same tokens at column + 8.
  // f(dt, dc, v) gets the offsets from this thread's first token and column,
  // compile-time constants once unrolled: no per-element address registers.
  const int g = lane / 4, cq = lane % 4;
  const int token0 = 8 * tg0 + 2 * cq;
  const int col0 = cw * 32 + g;
  auto for_each_result = [&](auto&& f) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int lt = 0; lt < kWG; ++lt) {
        f(8 * lt, 16 * j, acc[j][lt][0]);
        f(8 * lt + 1, 16 * j, acc[j][lt][1]);
        f(8 * lt, 16 * j + 8, acc[j][lt][2]);
        f(8 * lt + 1, 16 * j + 8, acc[j][lt][3]);
      }
    }
  };
  // The accumulators rounded into strip s of C.
  auto store_c = [&](int s) {
    const int64_t n0 = static_cast<int64_t>(s) * kCols;
    uint16_t* out = p.c + token0 * static_cast<int64_t>(p.n) + n0 + col0;
    for_each_result([&](int dt, int dc, float v) {
      if (token0 + dt < p.m && n0 + col0 + dc < p.n) out[dt * p.n + dc] = ToStorage<kBf16>(v);
    });
  };

  // The accumulators of strip s, which this CTA's run ends (or leaves) here.
  auto flush = [&](int s) {
    const int sbeg = s * p.upc, send = sbeg + p.upc;
    if (u0 <= sbeg && u1 >= send) {
      store_c(s);
      return;
    }
    const int64_t slot_floats = static_cast<int64_t>(p.m) * kCols;
    const int offset = token0 * kCols + col0;  // this thread's first element in a slot
    const int slot = u0 >= sbeg ? 2 * cta : 2 * cta + 1;
    float* mine = p.partials + slot * slot_floats + offset;
    for_each_result([&](int dt, int dc, float v) {
      if (token0 + dt < p.m) __stcg(mine + dt * kCols + dc, v);
    });
    __threadfence();  // each thread's partial visible device-wide before the arrival
    __syncthreads();
    const int first = Owner(sbeg, p), last = Owner(send - 1, p);
    if (threadIdx.x == 0) {
      const unsigned prior = atomicAdd(&p.arrivals[s], 1u);
      last_arrival = prior == static_cast<unsigned>(last - first);
    }
    __syncthreads();
    if (!last_arrival) return;
    __threadfence();  // the other CTAs' partials, published before their arrivals
    // Every slot of the strip added in CTA order (this CTA's own too), by the
    // whole CTA over 4-column runs of the slots: coalesced 16-byte loads, and
    // no registers held next to the accumulators.
    const int64_t n0 = static_cast<int64_t>(s) * kCols;
    const int first_slot = UnitBegin(first, p) >= sbeg ? 2 * first : 2 * first + 1;
    constexpr int kQuads = kCols / 4;
    for (int e = threadIdx.x; e < p.m * kQuads; e += kThreads) {
      const int token = e / kQuads, col = (e % kQuads) * 4;
      if (n0 + col >= p.n) continue;  // N % 8 == 0: a run is wholly inside or past N
      const float* src = p.partials + token * kCols + col;
      float4 sum = __ldcg(reinterpret_cast<const float4*>(src + first_slot * slot_floats));
      for (int c = first + 1; c <= last; ++c) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(src + 2 * c * slot_floats));
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
      }
      uint16_t* out = p.c + token * static_cast<int64_t>(p.n) + n0 + col;
      out[0] = ToStorage<kBf16>(sum.x);
      out[1] = ToStorage<kBf16>(sum.y);
      out[2] = ToStorage<kBf16>(sum.z);
      out[3] = ToStorage<kBf16>(sum.w);
    }
    if (threadIdx.x == 0) p.arrivals[s] = 0;  // every contributor has arrived
  };

  // kStages - 1 in flight ahead of the one computed; one commit group per unit
  // (empty ones too, so that the group count stays exact). The slot refilled
  // at step i was computed at step i - 1, which every thread has left at the
  // barrier.
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < steps) issue(i);
    CpAsyncCommit();
  }
  for (int i = 0; i < steps; ++i) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();
    compute(i % kStages);
    if (i + kStages - 1 < steps) issue(i + kStages - 1);
    CpAsyncCommit();
    const int u = u0 + i;
    const int s = u / p.upc;
    if (u - s * p.upc == p.upc - 1 || i == steps - 1) {
      flush(s);
      zero();
    }
  }
  CpAsyncWait<0>();
}

// ---- host side -------------------------------------------------------------------

// The arrival counters of the calling thread's `stream` on the current device:
// kMaxStrips of them (kernels/common/stream_counters.h says how they stay zero).
struct MidStreamArrivals;
cudaError_t StreamArrivals(cudaStream_t stream, unsigned** out) {
  return StreamArrivalCounters<MidStreamArrivals, kMaxStrips>(stream, out);
}

// One instantiation: its shared memory raised once per device, and the CTAs
// an SM holds at that footprint (asked of the runtime, not assumed).
struct Kernel {
  const void* fn = nullptr;
  int threads = 0;
  int smem = 0;
  int ctas_per_sm = 0;
};

template <bool kBf16, int TG, int kCols, int kTS>
cudaError_t Resolve(Kernel* out) {
  constexpr auto kFn = &MidStreamKernel<kBf16, TG, kCols, kTS>;
  constexpr int kSmem = Tile<kCols, TG>::kSmemBytes;
  constexpr int kThreads = kCols * kTS;
  constexpr int kMaxDevices = 64;
  static std::atomic<int> fit[kMaxDevices] = {};  // CTAs an SM holds; 0: not asked yet
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  int ctas = device < kMaxDevices ? fit[device].load(std::memory_order_acquire) : 0;
  if (ctas == 0) {
    err = cudaFuncSetAttribute(kFn, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (err != cudaSuccess) return err;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kFn, kThreads, kSmem);
    if (err != cudaSuccess) return err;
    if (ctas < 1) return cudaErrorInvalidConfiguration;
    if (device < kMaxDevices) fit[device].store(ctas, std::memory_order_release);
  }
  *out = {reinterpret_cast<const void*>(kFn), kThreads, kSmem, ctas};
  return cudaSuccess;
}

template <bool kBf16, int TG>
cudaError_t ResolveConfig(const MidStreamConfig& config, Kernel* out) {
  if (config.columns == 256 && config.token_split == 1) return Resolve<kBf16, TG, 256, 1>(out);
  if (config.columns == 256 && config.token_split == 2) return Resolve<kBf16, TG, 256, 2>(out);
  if constexpr (TG <= 8) {
    if (config.columns == 512 && config.token_split == 1) return Resolve<kBf16, TG, 512, 1>(out);
  }
  return cudaErrorInvalidValue;
}

template <bool kBf16>
cudaError_t ResolveGroups(int64_t m, const MidStreamConfig& config, Kernel* out) {
  if (m <= 32) return ResolveConfig<kBf16, 4>(config, out);
  if (m <= 64) return ResolveConfig<kBf16, 8>(config, out);
  if (m <= 96) return ResolveConfig<kBf16, 12>(config, out);
  return ResolveConfig<kBf16, 16>(config, out);
}

cudaError_t ResolveKernel(const LaunchArgs& args, const MidStreamConfig& config, Kernel* out) {
  return args.dtype == DType::kBF16 ? ResolveGroups<true>(args.m, config, out)
                                    : ResolveGroups<false>(args.m, config, out);
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool Built(const MidStreamConfig& config, int64_t m) {
  for (const MidStreamConfig& c : kMidStreamConfigs) {
    if (c.columns == config.columns && c.token_split == config.token_split) {
      return c.columns == 256 || m <= 64;
    }
  }
  return false;
}

cudaError_t LaunchDefault(const LaunchArgs& args, cudaStream_t stream) {
  return LaunchMidStream(args, kMidStreamDefault, stream);
}
size_t DefaultWorkspaceBytes(const LaunchArgs& args) {
  return MidStreamWorkspaceBytes(args, kMidStreamDefault);
}
const char* DefaultUnsupported(const LaunchArgs& args) {
  return MidStreamUnsupportedReason(args, kMidStreamDefault);
}

}  // namespace

MidStreamPlan MakeMidStreamPlan(int64_t n, int64_t k, int sm_count, int ctas_per_sm,
                                int columns) {
  MidStreamPlan plan;
  plan.strips = static_cast<int>(CeilDiv(n, std::max(columns, 1)));
  plan.units_per_strip = static_cast<int>(CeilDiv(k, kRows));
  plan.units = int64_t{plan.strips} * plan.units_per_strip;
  const int64_t slots = int64_t{std::max(sm_count, 1)} * std::max(ctas_per_sm, 1);
  plan.ctas = static_cast<int>(std::min(slots, plan.units));
  return plan;
}

const char* MidStreamUnsupportedReason(const LaunchArgs& args, const MidStreamConfig& config) {
  if (args.dtype != DType::kF16 && args.dtype != DType::kBF16) return "dtype is not f16 or bf16";
  if (!DimsInRange(args) || args.m > kMidStreamMaxM) return "M outside 1..128";
  // Offsets inside C are 32-bit (no 64-bit address registers per element).
  if (args.m * args.n >= kMaxLaunchDim) return "M x N must be below 2^31";
  if (args.n % 8 != 0 || args.k % 8 != 0) return "N and K must be multiples of 8";
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) return "null operand";
  if (!Aligned(args.a) || !Aligned(args.b)) return "A and B must be 16-byte aligned";
  if (!Built(config, args.m)) return "config not built for this M";
  if (CeilDiv(args.n, config.columns) > kMaxStrips) return "N needs more strips than counters";
  if (CeilDiv(args.n, config.columns) * CeilDiv(args.k, kRows) >= kMaxLaunchDim) {
    return "more than 2^31 units";
  }
  return nullptr;
}

size_t MidStreamWorkspaceBytes(const LaunchArgs& args, const MidStreamConfig& config) {
  if (MidStreamUnsupportedReason(args, config) != nullptr) return 0;
  Kernel kernel;
  if (ResolveKernel(args, config, &kernel) != cudaSuccess) return 0;
  const MidStreamPlan plan =
      MakeMidStreamPlan(args.n, args.k, args.sm_count, kernel.ctas_per_sm, config.columns);
  return size_t{2} * static_cast<size_t>(plan.ctas) * static_cast<size_t>(args.m) *
         static_cast<size_t>(config.columns) * sizeof(float);
}

cudaError_t LaunchMidStream(const LaunchArgs& args, const MidStreamConfig& config,
                            cudaStream_t stream) {
  if (MidStreamUnsupportedReason(args, config) != nullptr) return cudaErrorInvalidValue;
  Kernel kernel;
  cudaError_t err = ResolveKernel(args, config, &kernel);
  if (err != cudaSuccess) return err;
  const MidStreamPlan plan =
      MakeMidStreamPlan(args.n, args.k, args.sm_count, kernel.ctas_per_sm, config.columns);
  const size_t need = size_t{2} * static_cast<size_t>(plan.ctas) * static_cast<size_t>(args.m) *
                      static_cast<size_t>(config.columns) * sizeof(float);
  if (args.workspace == nullptr || args.workspace_bytes < need) return cudaErrorInvalidValue;
  Params p;
  p.a = static_cast<const uint16_t*>(args.a);
  p.b = static_cast<const uint16_t*>(args.b);
  p.c = static_cast<uint16_t*>(args.c);
  p.partials = static_cast<float*>(args.workspace);
  err = StreamArrivals(stream, &p.arrivals);
  if (err != cudaSuccess) return err;
  p.m = static_cast<int>(args.m);
  p.n = static_cast<int>(args.n);
  p.k = static_cast<int>(args.k);
  p.upc = plan.units_per_strip;
  p.units = static_cast<int>(plan.units);
  p.ctas = plan.ctas;
  void* params[] = {&p};
  err = cudaLaunchKernel(kernel.fn, dim3(static_cast<unsigned>(plan.ctas)),
                         dim3(static_cast<unsigned>(kernel.threads)), params,
                         static_cast<size_t>(kernel.smem), stream);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

const Launcher kMidStream = {"LaunchMidStream", LaunchDefault, DefaultWorkspaceBytes,
                             DefaultUnsupported};

}  // namespace arbiter::kernels
