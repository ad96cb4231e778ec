// splitk_tiny_prev: splitk_tiny as it was at 6d90a6a (two cluster barriers, a
// __threadfence by every thread on each side of the cross-cluster arrival), kept
// only so that bench/splitk_tiny times it beside the current kernel in one
// process. Not registered; delete once that comparison is recorded.
//
//
// Launch geometry: 1-D. grid.x walks the K slices (CTA x covers K
// [x * k_slice, min(K, (x + 1) * k_slice)), possibly empty), in thread-block
// clusters of `cluster` consecutive CTAs (cluster id x / cluster, rank
// x % cluster). Every CTA computes the whole C (ceil(M/16) x ceil(N/8) m16n8
// fragments) over its slice, so no grid axis walks M or N.
//
// Why this shape: the problem is all latency and bytes (16 x 16 x 65536 bf16:
// 4 MiB, 33 MFLOP). One CTA per SM, each with its whole slice in flight at
// once (a ring of 4 stages of 128 k-rows, 16-byte cp.async copies: 32 KiB per
// CTA at 16 x 16 x 65536), then the adds happen on chip, in the same launch:
// a second (reduce) launch costs as much as the whole problem.
//
// Per CTA: 8 warps; warp w does k16 step w of every stage (mma.sync m16n8k16,
// f32 accumulators), so each accumulator sees its K steps in a fixed order.
//
// Determinism (bitwise run to run): the sums happen in an order fixed by the
// plan alone - (1) warps 0..7 of a CTA in shared memory, (2) ranks 0..C-1 of
// a cluster through distributed shared memory (rank r adds slice r/C of the
// tile over every rank), (3) clusters 0..G-1 from their workspace slabs, by
// the rank-r CTA of whichever cluster arrives last at counter r (a per-stream
// counter it resets to zero for the next launch; arrival order picks who adds,
// never the order of the adds). The plan follows K and the SM count only.

#include "kernels/splitk_tiny/splitk_tiny_prev.h"

#include "kernels/splitk_tiny/splitk_tiny.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "kernels/common/mma_sync.cuh"
#include "kernels/common/storage.cuh"
#include "kernels/common/tile_mainloop.cuh"

namespace arbiter::kernels {
namespace {

namespace cg = cooperative_groups;
using mma_tile::CpAsync16;
using mma_tile::CpAsyncCommit;
using mma_tile::CpAsyncWait;
using mma_tile::SmemAddress;

constexpr int kWarps = 8;  // one k16 step of a stage each
constexpr int kThreads = kWarps * 32;
constexpr int kStageK = kWarps * 16;  // 128 k-rows a stage
constexpr int kRing = 4;              // 4 stages in flight: 32 KiB a CTA at 16 x 16
constexpr int kAStride = kStageK + 8;  // halves per A row: 272 bytes, so the 8 rows of
                                       // a fragment load fall in distinct banks
constexpr int kMaxCluster = 8;         // the portable cluster size
constexpr int kSlabBatch = 8;          // cluster slabs loaded at once in the final sum

struct Params {
  const uint16_t* a;
  const uint16_t* b;
  uint16_t* c;
  float* partials;     // [clusters][tile floats] when clusters > 1
  unsigned* arrivals;  // [kMaxCluster], zero on entry; left zero
  int m, n;
  int64_t k, k_slice;
  int clusters;
};

template <int kMT, int kNT>
struct Tile {
  static constexpr int kRows = kMT * 16;
  static constexpr int kFloats = kMT * kNT * 4 * 32;  // the accumulators in fragment order
  static constexpr int kAHalves = kRows * kAStride;
  __host__ __device__ static int BHalves(int n) { return kStageK * n; }
  static size_t SmemBytes(int n) {
    const size_t ring = size_t{kRing} * (kAHalves + BHalves(n)) * 2;
    const size_t reduce = size_t{kWarps} * kFloats * sizeof(float);
    return std::max(ring, reduce);
  }
};

// Copies stage `s` of the slice [k_begin, k_end) into ring slot s % kRing:
// A's rows [0, M) x k-columns as 16-byte chunks, and B's k-rows as one flat run
// (rows of N elements back to back, so any N copies in 16-byte chunks: the run
// starts at a multiple of 8 rows). What lies past M or k_end is zero-filled, so
// the mma adds exact zeros there (never stale NaN bits).
template <int kMT, int kNT>
__device__ __forceinline__ void IssueStage(const Params& p, int64_t k_begin, int64_t k_end, int s,
                                           uint16_t* ring) {
  using T = Tile<kMT, kNT>;
  uint16_t* sa = ring + (s % kRing) * (T::kAHalves + T::BHalves(p.n));
  uint16_t* sb = sa + T::kAHalves;
  const int64_t k0 = k_begin + int64_t{s} * kStageK;
  constexpr int kChunksPerRow = kStageK / 8;
  for (int c = threadIdx.x; c < T::kRows * kChunksPerRow; c += kThreads) {
    const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const bool valid = row < p.m && k0 + col < k_end;
    const uint16_t* src = valid ? p.a + row * p.k + k0 + col : p.a;
    CpAsync16(SmemAddress(sa + row * kAStride + col), src, valid ? 16 : 0);
  }
  const int64_t b0 = k0 * p.n, b_end = k_end * p.n;
  for (int c = threadIdx.x; c < T::BHalves(p.n) / 8; c += kThreads) {
    const int64_t g = b0 + int64_t{c} * 8;
    const bool valid = g < b_end;
    CpAsync16(SmemAddress(sb + c * 8), valid ? p.b + g : p.b, valid ? 16 : 0);
  }
}

// This warp's k16 step of ring slot `slot` into the accumulators.
template <int kMT, int kNT, bool kBf16>
__device__ __forceinline__ void ComputeStage(const Params& p, const uint16_t* ring, int slot,
                                             float (&acc)[kMT][kNT][4]) {
  using T = Tile<kMT, kNT>;
  const uint16_t* sa = ring + slot * (T::kAHalves + T::BHalves(p.n));
  const uint16_t* sb = sa + T::kAHalves;
  const int lane = threadIdx.x % 32, kk = (threadIdx.x / 32) * 16;
  const int g = lane / 4, t = lane % 4;
  uint32_t af[kMT][4];
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi) {
    const uint16_t* base = sa + (mi * 16 + g) * kAStride + kk + 2 * t;
    af[mi][0] = *reinterpret_cast<const uint32_t*>(base);
    af[mi][1] = *reinterpret_cast<const uint32_t*>(base + 8 * kAStride);
    af[mi][2] = *reinterpret_cast<const uint32_t*>(base + 8);
    af[mi][3] = *reinterpret_cast<const uint32_t*>(base + 8 * kAStride + 8);
  }
#pragma unroll
  for (int ni = 0; ni < kNT; ++ni) {
    // B fragment: k-rows 2t, 2t+1 (and + 8) of column ni*8 + g; B's k-rows sit
    // N apart, so its halves are loaded one by one (columns past N read zero).
    const int col = ni * 8 + g;
    uint32_t bf[2] = {0, 0};
    if (col < p.n) {
      const uint16_t* bp = sb + (kk + 2 * t) * p.n + col;
      bf[0] = bp[0] | (uint32_t{bp[p.n]} << 16);
      bf[1] = bp[8 * p.n] | (uint32_t{bp[9 * p.n]} << 16);
    }
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) Mma16816<kBf16>(acc[mi][ni], af[mi], bf);
  }
}

template <int kMT, int kNT, bool kBf16>
__device__ __forceinline__ void Mainloop(const Params& p, int64_t k_begin, int64_t k_end,
                                         uint16_t* ring, float (&acc)[kMT][kNT][4]) {
  const int stages = static_cast<int>((k_end - k_begin + kStageK - 1) / kStageK);
#pragma unroll
  for (int s = 0; s < kRing - 1; ++s) {
    if (s < stages) IssueStage<kMT, kNT>(p, k_begin, k_end, s, ring);
    CpAsyncCommit();
  }
  for (int s = 0; s < stages; ++s) {
    // Slot (s + kRing - 1) % kRing was last read in step s - 1, behind its barrier.
    if (s + kRing - 1 < stages) IssueStage<kMT, kNT>(p, k_begin, k_end, s + kRing - 1, ring);
    CpAsyncCommit();
    CpAsyncWait<kRing - 1>();
    __syncthreads();
    ComputeStage<kMT, kNT, kBf16>(p, ring, s % kRing, acc);
    __syncthreads();
  }
}

// Element `i` of a tile in fragment order (((mi * kNT + ni) * 4 + e) * 32 + lane)
// to C, rounded to the dtype, where it lies inside M x N.
template <int kNT, bool kBf16>
__device__ __forceinline__ void StoreElement(const Params& p, int i, float v) {
  const int lane = i % 32, e = (i / 32) % 4, f = i / 128;
  const int row = (f / kNT) * 16 + lane / 4 + (e / 2) * 8;
  const int col = (f % kNT) * 8 + (lane % 4) * 2 + (e % 2);
  if (row < p.m && col < p.n) p.c[row * p.n + col] = ToStorage<kBf16>(v);
}

template <int kNT, bool kBf16>
__device__ __forceinline__ void StoreFloat4(const Params& p, int i, float4 v) {
  StoreElement<kNT, kBf16>(p, i, v.x);
  StoreElement<kNT, kBf16>(p, i + 1, v.y);
  StoreElement<kNT, kBf16>(p, i + 2, v.z);
  StoreElement<kNT, kBf16>(p, i + 3, v.w);
}

__device__ __forceinline__ void Add(float4& s, const float4 v) {
  s.x += v.x;
  s.y += v.y;
  s.z += v.z;
  s.w += v.w;
}

template <int kMT, int kNT, bool kBf16>
__global__ void __launch_bounds__(kThreads, 1) SplitKTinyKernel(const Params p) {
  using T = Tile<kMT, kNT>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ bool last_arrival;
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t k_begin = blockIdx.x * p.k_slice;
  const int64_t k_end = min(p.k, k_begin + p.k_slice);
  float acc[kMT][kNT][4] = {};
  if (k_begin < k_end) Mainloop<kMT, kNT, kBf16>(p, k_begin, k_end, reinterpret_cast<uint16_t*>(smem), acc);

  // (1) The warps' accumulators, added in warp order into the CTA's tile (the
  // ring is idle: the main loop ends behind a barrier).
  float* tile = reinterpret_cast<float*>(smem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
    for (int ni = 0; ni < kNT; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        tile[warp * T::kFloats + ((mi * kNT + ni) * 4 + e) * 32 + lane] = acc[mi][ni][e];
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < T::kFloats; i += kThreads) {
    float s = tile[i];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) s += tile[w * T::kFloats + i];
    tile[i] = s;
  }
  cluster.sync();  // every rank's tile complete and visible to the cluster

  // (2) Rank r adds its part of the tile over ranks 0..C-1, in rank order,
  // writing the sum over its own part (read by no other rank).
  const int rank = static_cast<int>(cluster.block_rank());
  const int ranks = static_cast<int>(cluster.num_blocks());
  const int part = T::kFloats / ranks;  // ranks divides it: a power of two <= 8
  const int first = rank * part;
  // Every rank's float4 is loaded before the first add: the DSMEM round trips
  // overlap instead of queueing behind the adds (the order of the adds is unchanged).
  for (int i = first + threadIdx.x * 4; i < first + part; i += kThreads * 4) {
    float4 v[kMaxCluster];
#pragma unroll
    for (int q = 0; q < kMaxCluster; ++q) {
      if (q < ranks) v[q] = *cluster.map_shared_rank(reinterpret_cast<float4*>(tile + i), q);
    }
    float4 s = v[0];
#pragma unroll
    for (int q = 1; q < kMaxCluster; ++q) {
      if (q < ranks) Add(s, v[q]);
    }
    *reinterpret_cast<float4*>(tile + i) = s;
  }
  cluster.sync();  // no rank leaves while another still reads its tile

  if (p.clusters == 1) {
    for (int i = first + threadIdx.x * 4; i < first + part; i += kThreads * 4) {
      StoreFloat4<kNT, kBf16>(p, i, *reinterpret_cast<const float4*>(tile + i));
    }
    return;
  }

  // (3) Publish this cluster's part, then arrive at counter `rank`; the last of
  // the clusters to arrive adds every cluster's part in cluster order.
  const int cluster_id = blockIdx.x / ranks;
  float* slab = p.partials + int64_t{cluster_id} * T::kFloats;
  for (int i = first + threadIdx.x * 4; i < first + part; i += kThreads * 4) {
    __stcg(reinterpret_cast<float4*>(slab + i), *reinterpret_cast<const float4*>(tile + i));
  }
  __threadfence();  // the slab is visible device-wide before the arrival
  __syncthreads();
  if (threadIdx.x == 0) {
    last_arrival = atomicAdd(p.arrivals + rank, 1u) == static_cast<unsigned>(p.clusters - 1);
  }
  __syncthreads();
  if (!last_arrival) return;
  __threadfence();  // every other cluster's slab is read after its arrival
  // The slabs are loaded kSlabBatch at a time before they are added, so their
  // L2 round trips overlap instead of forming a chain (16 clusters on the H200);
  // the adds stay in cluster order. With the rank loads above: 0.4-0.6 us less at
  // 16 x 16 x 65536 (bench/results/small-gemm-floor-h200.md).
  for (int i = first + threadIdx.x * 4; i < first + part; i += kThreads * 4) {
    float4 s = __ldcg(reinterpret_cast<const float4*>(p.partials + i));
    for (int c0 = 1; c0 < p.clusters; c0 += kSlabBatch) {
      float4 v[kSlabBatch];
#pragma unroll
      for (int u = 0; u < kSlabBatch; ++u) {
        if (c0 + u < p.clusters) {
          v[u] = __ldcg(reinterpret_cast<const float4*>(p.partials + int64_t{c0 + u} * T::kFloats + i));
        }
      }
#pragma unroll
      for (int u = 0; u < kSlabBatch; ++u) {
        if (c0 + u < p.clusters) Add(s, v[u]);
      }
    }
    StoreFloat4<kNT, kBf16>(p, i, s);
  }
  if (threadIdx.x == 0) atomicExch(p.arrivals + rank, 0u);  // for the stream's next launch
}

// ---- host side ----

int FragsM(int64_t m) { return m <= 16 ? 1 : m <= 32 ? 2 : 4; }
int FragsN(int64_t n) { return n <= 16 ? 2 : n <= 32 ? 4 : 8; }

int TileFloats(const LaunchArgs& args) { return FragsM(args.m) * FragsN(args.n) * 4 * 32; }

// The arrival counters of the calling thread's `stream` on the current device:
// kMaxCluster unsigned, zeroed (in stream order) when first handed out. Every
// launch leaves them at zero, and launches on one stream never overlap, so
// each launch finds them at zero. Not in the workspace: the stream's scratch
// is shared with other candidates, which leave anything there. The default
// and per-thread streams are keyed by thread as well. Thread-safe.
cudaError_t StreamArrivals(cudaStream_t stream, unsigned** out) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const bool shared_handle = stream == nullptr || stream == cudaStreamPerThread;
  using Key = std::tuple<int, cudaStream_t, std::thread::id>;
  const Key key{device, stream, shared_handle ? std::this_thread::get_id() : std::thread::id()};
  static std::mutex mu;
  static auto* counters = new std::map<Key, unsigned*>();  // guarded by mu; never freed
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = counters->find(key); it != counters->end()) {
    *out = it->second;
    return cudaSuccess;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  err = cudaStreamIsCapturing(stream, &capture);
  if (err != cudaSuccess) return err;
  if (capture != cudaStreamCaptureStatusNone) return cudaErrorStreamCaptureUnsupported;
  unsigned* p = nullptr;
  err = cudaMalloc(&p, kMaxCluster * sizeof(unsigned));
  if (err != cudaSuccess) return err;
  err = cudaMemsetAsync(p, 0, kMaxCluster * sizeof(unsigned), stream);
  if (err != cudaSuccess) {
    cudaFree(p);
    return err;
  }
  counters->emplace(key, p);
  *out = p;
  return cudaSuccess;
}

template <int kMT, int kNT, bool kBf16>
cudaError_t LaunchTile(const Params& p, const SplitKTinyPlan& plan, cudaStream_t stream) {
  auto* kernel = &SplitKTinyKernel<kMT, kNT, kBf16>;
  // The largest ring any N <= 64 needs, set once.
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(Tile<kMT, kNT>::SmemBytes(kSplitKTinyMaxN)));
  if (attr != cudaSuccess) return attr;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(plan.ctas));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = Tile<kMT, kNT>::SmemBytes(p.n);
  config.stream = stream;
  cudaLaunchAttribute cluster = {};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(plan.cluster);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, p);
}

template <bool kBf16>
cudaError_t LaunchDtype(const Params& p, const SplitKTinyPlan& plan, cudaStream_t stream) {
  const int mt = FragsM(p.m), nt = FragsN(p.n);
  if (mt == 1) {
    if (nt == 2) return LaunchTile<1, 2, kBf16>(p, plan, stream);
    if (nt == 4) return LaunchTile<1, 4, kBf16>(p, plan, stream);
    return LaunchTile<1, 8, kBf16>(p, plan, stream);
  }
  if (mt == 2) {
    if (nt == 2) return LaunchTile<2, 2, kBf16>(p, plan, stream);
    if (nt == 4) return LaunchTile<2, 4, kBf16>(p, plan, stream);
    return LaunchTile<2, 8, kBf16>(p, plan, stream);
  }
  if (nt == 2) return LaunchTile<4, 2, kBf16>(p, plan, stream);
  if (nt == 4) return LaunchTile<4, 4, kBf16>(p, plan, stream);
  return LaunchTile<4, 8, kBf16>(p, plan, stream);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

size_t SplitKTinyPrevWorkspaceBytes(const LaunchArgs& args) {
  if (!DimsInRange(args) || SplitKTinyUnsupported(args) != nullptr) return 0;
  const SplitKTinyPlan plan = MakeSplitKTinyPlan(args.k, args.sm_count);
  if (plan.clusters() == 1) return 0;
  return static_cast<size_t>(plan.clusters()) * TileFloats(args) * sizeof(float);
}

cudaError_t LaunchSplitKTinyPrev(const LaunchArgs& args, cudaStream_t stream) {
  if (!DimsInRange(args) || SplitKTinyUnsupported(args) != nullptr || args.c == nullptr) {
    return cudaErrorInvalidValue;
  }
  const size_t workspace = SplitKTinyPrevWorkspaceBytes(args);
  if (workspace > 0 && (args.workspace == nullptr || args.workspace_bytes < workspace ||
                        !Aligned16(args.workspace))) {
    return cudaErrorInvalidValue;
  }
  const SplitKTinyPlan plan = MakeSplitKTinyPlan(args.k, args.sm_count);
  Params p{};
  p.a = static_cast<const uint16_t*>(args.a);
  p.b = static_cast<const uint16_t*>(args.b);
  p.c = static_cast<uint16_t*>(args.c);
  p.partials = static_cast<float*>(args.workspace);
  p.m = static_cast<int>(args.m);
  p.n = static_cast<int>(args.n);
  p.k = args.k;
  p.k_slice = plan.k_slice;
  p.clusters = plan.clusters();
  if (p.clusters > 1) {
    const cudaError_t err = StreamArrivals(stream, &p.arrivals);
    if (err != cudaSuccess) return err;
  }
  return args.dtype == DType::kBF16 ? LaunchDtype<true>(p, plan, stream)
                                    : LaunchDtype<false>(p, plan, stream);
}

const Launcher kSplitKTinyPrev = {"LaunchSplitKTinyPrev", LaunchSplitKTinyPrev,
                                  SplitKTinyPrevWorkspaceBytes, SplitKTinyUnsupported};

}  // namespace arbiter::kernels
