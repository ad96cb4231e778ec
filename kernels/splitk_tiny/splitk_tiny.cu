// splitk_tiny: a tiny C (M, N <= 64) against a long K in one launch.
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
// After the loads the time is a chain of waits (Nsight Compute on run 1's
// kernel, bench/results/small-gemm-floor-h200.md: SMs active 56% of the
// kernel, stalled on barriers, fences and distributed shared memory), so the
// chain is kept short: one cluster barrier whose second half is waited for only
// at exit, the slab written straight from the cluster sum, one acquire-release
// atomic by one thread in place of a __threadfence by every thread on each side
// of it, and the final sum's loads all in flight at once across the CTA. The
// code is kept small as well (one copy of the stage code): after an L2 flush
// every instruction-cache miss is a DRAM round trip. What is left after the
// loads, H200 run 3 (bench/results/splitk-tiny-h200.md, 16 x 16 x 65536): the
// CTAs' own sums end ~0.9 us after a kernel that only reads A and B, the
// cluster sum adds ~1.0 us and the cross-cluster sum ~1.8 us.
//
// Per CTA: 8 warps; warp w does k16 step w of every stage (mma.sync m16n8k16,
// f32 accumulators), so each accumulator sees its K steps in a fixed order.
//
// Determinism (bitwise run to run): the sums happen in an order fixed by the
// plan and the tile alone - (1) warps 0..7 of a CTA in shared memory, (2)
// ranks 0..C-1 of a cluster through distributed shared memory (rank r adds part
// r of the tile over every rank), (3) clusters 0..G-1 from their workspace
// slabs, by the rank-r CTA of whichever cluster arrives last at counter r (a
// per-stream counter it resets to zero for the next launch; arrival order picks
// who adds, never the order of the adds): consecutive runs of slabs summed in
// order by groups of threads, then the groups' sums in group order. The plan
// follows K, the SM count and the cluster cap only.

#include "kernels/splitk_tiny/splitk_tiny.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>

#include "kernels/common/mma_sync.cuh"
#include "kernels/common/stream_counters.h"
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
constexpr int kMaxCluster = kSplitKTinyMaxCluster;
constexpr int kSlabBatch = 8;  // slab loads a thread has in flight in the final sum

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
#pragma unroll 1
  for (int c = threadIdx.x; c < T::kRows * kChunksPerRow; c += kThreads) {
    const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const bool valid = row < p.m && k0 + col < k_end;
    const uint16_t* src = valid ? p.a + row * p.k + k0 + col : p.a;
    CpAsync16(SmemAddress(sa + row * kAStride + col), src, valid ? 16 : 0);
  }
  const int64_t b0 = k0 * p.n, b_end = k_end * p.n;
#pragma unroll 1
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

// One loop, one copy of each stage's code: step s issues stage s (while there
// is one) and computes stage s - (kRing - 1) once its copies have landed.
template <int kMT, int kNT, bool kBf16>
__device__ __forceinline__ void Mainloop(const Params& p, int64_t k_begin, int64_t k_end,
                                         uint16_t* ring, float (&acc)[kMT][kNT][4]) {
  const int stages = static_cast<int>((k_end - k_begin + kStageK - 1) / kStageK);
#pragma unroll 1
  for (int s = 0; s < stages + kRing - 1; ++s) {
    // Slot s % kRing was last read by the compute of stage s - kRing, in step
    // s - 1, behind that step's closing barrier.
    if (s < stages) IssueStage<kMT, kNT>(p, k_begin, k_end, s, ring);
    CpAsyncCommit();
    if (s >= kRing - 1) {
      CpAsyncWait<kRing - 1>();
      __syncthreads();
      ComputeStage<kMT, kNT, kBf16>(p, ring, (s - (kRing - 1)) % kRing, acc);
      // Needed before step s + 1 issues into the slot just read, and after the
      // last step (the CTA's sum reuses the ring); with the whole slice in
      // flight at once (stages <= kRing) that is the last step alone.
      if (s + 1 < stages || s + 1 == stages + kRing - 1) __syncthreads();
    }
  }
}

// Element `i` of a tile in fragment order (((mi * kNT + ni) * 4 + e) * 32 + lane)
// to C, rounded to the dtype, where it lies inside M x N.
template <int kNT, bool kBf16>
__device__ __forceinline__ void StoreElement(uint16_t* c, int m, int n, int i, float v) {
  const int lane = i % 32, e = (i / 32) % 4, f = i / 128;
  const int row = (f / kNT) * 16 + lane / 4 + (e / 2) * 8;
  const int col = (f % kNT) * 8 + (lane % 4) * 2 + (e % 2);
  if (row < m && col < n) c[row * n + col] = ToStorage<kBf16>(v);
}

// The two halves of a cluster barrier: arrive once this CTA's shared memory may
// be left (no other rank reads it after), wait just before exit. Not .aligned:
// the threads arrive after loops of different trip counts.
__device__ __forceinline__ void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

// One arrival at a cross-cluster counter, by one thread after a CTA barrier:
// release (this CTA's slab stores, ordered before it by the barrier, are visible
// to whoever acquires the count) and acquire (the earlier arrivals' slabs are
// visible to this CTA after its next barrier). Returns the count before it.
__device__ __forceinline__ unsigned ArriveAcqRel(unsigned* counter) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n"
               : "=r"(old)
               : "l"(counter)
               : "memory");
  return old;
}

// Floats [first, first + part) of the tile over `clusters` slabs, to C
// (M x N). Threads split into `groups` that each add a
// consecutive run of slabs in order, kSlabBatch loads in flight, and the
// groups' sums are then added in group order: a fixed order for a given plan
// and tile. Only the last cluster's CTAs run it. Out of line as it was timed
// (run 3's `no warm-up` row); inlining it was not measured. (A warm-up run of
// it by every CTA while its loads were in flight, to have its code in the
// caches at the end, cost ~1 us in that run and is gone.)
template <int kMT, int kNT, bool kBf16>
__device__ __noinline__ void SumSlabs(const float* partials, uint16_t* c, int m, int n, int clusters,
                                      int first, int part, float* scratch) {
  using T = Tile<kMT, kNT>;
  const int groups = part >= kThreads ? 1 : min(kThreads / part, clusters);
  const int per = (clusters + groups - 1) / groups;
  const int g = threadIdx.x / min(part, kThreads);
  if (g < groups) {
    const int c0 = g * per, c1 = min(clusters, c0 + per);
#pragma unroll 1
    for (int f = threadIdx.x % min(part, kThreads); f < part; f += kThreads) {
      const float* src = partials + first + f;
      float s = 0.f;
#pragma unroll 1
      for (int slab = c0; slab < c1; slab += kSlabBatch) {
        float v[kSlabBatch];
#pragma unroll
        for (int u = 0; u < kSlabBatch; ++u) {
          v[u] = slab + u < c1 ? __ldcg(src + int64_t{slab + u} * T::kFloats) : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kSlabBatch; ++u) s += v[u];
      }
      if (groups == 1) {
        StoreElement<kNT, kBf16>(c, m, n, first + f, s);
      } else {
        scratch[g * part + f] = s;
      }
    }
  }
  if (groups == 1) return;
  __syncthreads();
#pragma unroll 1
  for (int f = threadIdx.x; f < part; f += kThreads) {
    float s = scratch[f];
#pragma unroll 1
    for (int q = 1; q < groups; ++q) s += scratch[q * part + f];
    StoreElement<kNT, kBf16>(c, m, n, first + f, s);
  }
}

// kStop serves the bench's breakdown of the chain (LaunchSplitKTinyProbe):
// 1 ends after the CTA's own sum, 2 after the cluster sum and slab store.
template <int kMT, int kNT, bool kBf16, int kStop = 0>
__global__ void __launch_bounds__(kThreads, 1) SplitKTinyKernel(const Params p) {
  using T = Tile<kMT, kNT>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ bool last_arrival;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int ranks = static_cast<int>(cluster.num_blocks());
  const int part = T::kFloats / ranks;  // ranks divides it: a power of two <= 8
  const int first = rank * part;
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
#pragma unroll 1
  for (int i = threadIdx.x; i < T::kFloats; i += kThreads) {
    float s = tile[i];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) s += tile[w * T::kFloats + i];
    tile[i] = s;
  }
  if constexpr (kStop == 1) return;
  cluster.sync();  // every rank's tile complete and visible to the cluster

  // (2) Rank r adds part r of the tile over ranks 0..C-1, in rank order, every
  // rank's value loaded before the first add (the round trips overlap), and
  // writes the sum to C (one cluster) or to its cluster's slab.
  float* slab = p.partials + int64_t{blockIdx.x / ranks} * T::kFloats;
#pragma unroll 1
  for (int i = first + threadIdx.x; i < first + part; i += kThreads) {
    float v[kMaxCluster];
#pragma unroll
    for (int q = 0; q < kMaxCluster; ++q) {
      if (q < ranks) v[q] = *cluster.map_shared_rank(tile + i, q);
    }
    float s = v[0];
#pragma unroll
    for (int q = 1; q < kMaxCluster; ++q) {
      if (q < ranks) s += v[q];
    }
    if (p.clusters == 1) {
      StoreElement<kNT, kBf16>(p.c, p.m, p.n, i, s);
    } else {
      __stcg(slab + i, s);
    }
  }
  // No rank reads this CTA's tile after this; its exit waits for the others'
  // arrivals (ClusterWait below), so none leaves while another still reads it.
  ClusterArrive();
  if constexpr (kStop == 2) {
    ClusterWait();
    return;
  }

  // (3) Arrive at counter `rank`; the last of the clusters to arrive adds part
  // r of every cluster's slab, in cluster order. Its scratch is the warps'
  // partials (past the tile, which other ranks may still be reading).
  if (p.clusters > 1) {
    __syncthreads();  // this CTA's slab stores precede thread 0's release
    if (threadIdx.x == 0) last_arrival = ArriveAcqRel(p.arrivals + rank) == static_cast<unsigned>(p.clusters - 1);
    __syncthreads();  // and the other clusters' slabs are visible after its acquire
    if (last_arrival) {
      SumSlabs<kMT, kNT, kBf16>(p.partials, p.c, p.m, p.n, p.clusters, first, part, tile + T::kFloats);
      if (threadIdx.x == 0) atomicExch(p.arrivals + rank, 0u);  // for the stream's next launch
    }
  }
  ClusterWait();
}

// ---- host side ----

int FragsM(int64_t m) { return m <= 16 ? 1 : m <= 32 ? 2 : 4; }
int FragsN(int64_t n) { return n <= 16 ? 2 : n <= 32 ? 4 : 8; }

int TileFloats(const LaunchArgs& args) { return FragsM(args.m) * FragsN(args.n) * 4 * 32; }

// The arrival counters of the calling thread's `stream` on the current device:
// kMaxCluster of them (kernels/common/stream_counters.h says how they stay zero).
struct SplitKTinyArrivals;
cudaError_t StreamArrivals(cudaStream_t stream, unsigned** out) {
  return StreamArrivalCounters<SplitKTinyArrivals, kMaxCluster>(stream, out);
}

template <int kMT, int kNT, bool kBf16, int kStop = 0>
cudaError_t LaunchTile(const Params& p, const SplitKTinyPlan& plan, cudaStream_t stream) {
  auto* kernel = &SplitKTinyKernel<kMT, kNT, kBf16, kStop>;
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

SplitKTinyPlan MakeSplitKTinyPlan(int64_t k, int sm_count, int max_cluster) {
  SplitKTinyPlan plan;
  // One CTA per SM at most (each holds a 4-stage ring), and at least a stage
  // of K per CTA. Cluster sizes are powers of two so that they divide the tile.
  int cap = 1;
  while (cap * 2 <= std::min(max_cluster, kMaxCluster)) cap *= 2;
  int64_t slices = std::clamp<int64_t>(CeilDiv(k, kStageK), 1, std::max(sm_count, 1));
  if (slices >= cap) {
    slices = slices / cap * cap;
    plan.cluster = cap;
  } else {
    while (plan.cluster * 2 <= slices) plan.cluster *= 2;
    slices = plan.cluster;
  }
  plan.k_slice = CeilDiv(CeilDiv(k, slices), 16) * 16;
  // Rounding the slice up can leave slices with no K: keep whole clusters of
  // them out of the grid (a few empty CTAs in the last cluster add zeros).
  plan.ctas = static_cast<int>(CeilDiv(CeilDiv(k, plan.k_slice), plan.cluster) * plan.cluster);
  return plan;
}

const char* SplitKTinyUnsupported(const LaunchArgs& args) {
  if (args.dtype != DType::kF16 && args.dtype != DType::kBF16) return "dtype is not f16 or bf16";
  if (args.m > kSplitKTinyMaxM) return "M > 64 (the whole C is one CTA's tile)";
  if (args.n > kSplitKTinyMaxN) return "N > 64 (the whole C is one CTA's tile)";
  if (args.k % kSplitKTinyAlignK != 0) return "K % 8 != 0 (rows of A are copied 16 bytes at a time)";
  if (!Aligned16(args.a) || !Aligned16(args.b)) return "A or B is not 16-byte aligned";
  return nullptr;
}

size_t SplitKTinyWorkspaceBytes(const LaunchArgs& args, const SplitKTinyPlan& plan) {
  if (!DimsInRange(args) || SplitKTinyUnsupported(args) != nullptr) return 0;
  if (plan.cluster < 1 || plan.ctas % plan.cluster != 0 || plan.clusters() == 1) return 0;
  return static_cast<size_t>(plan.clusters()) * TileFloats(args) * sizeof(float);
}

size_t SplitKTinyWorkspaceBytes(const LaunchArgs& args) {
  return SplitKTinyWorkspaceBytes(args, MakeSplitKTinyPlan(args.k, args.sm_count));
}

namespace {

// The kernel's parameters for `args` under `plan`, or why not (cudaErrorInvalidValue).
cudaError_t MakeParams(const LaunchArgs& args, const SplitKTinyPlan& plan, cudaStream_t stream, Params* out) {
  if (!DimsInRange(args) || SplitKTinyUnsupported(args) != nullptr || args.c == nullptr) {
    return cudaErrorInvalidValue;
  }
  // A plan from MakeSplitKTinyPlan, for this K: whole power-of-two clusters of
  // 16-row-aligned slices that cover K.
  const bool cluster_ok = plan.cluster == 1 || plan.cluster == 2 || plan.cluster == 4 ||
                          plan.cluster == kMaxCluster;
  if (!cluster_ok || plan.ctas < 1 || plan.ctas % plan.cluster != 0 || plan.k_slice < 16 ||
      plan.k_slice % 16 != 0 || plan.ctas * plan.k_slice < args.k) {
    return cudaErrorInvalidValue;
  }
  const size_t workspace = SplitKTinyWorkspaceBytes(args, plan);
  if (workspace > 0 && (args.workspace == nullptr || args.workspace_bytes < workspace ||
                        !Aligned16(args.workspace))) {
    return cudaErrorInvalidValue;
  }
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
  *out = p;
  return cudaSuccess;
}

}  // namespace

cudaError_t LaunchSplitKTiny(const LaunchArgs& args, const SplitKTinyPlan& plan, cudaStream_t stream) {
  Params p;
  const cudaError_t err = MakeParams(args, plan, stream, &p);
  if (err != cudaSuccess) return err;
  return args.dtype == DType::kBF16 ? LaunchDtype<true>(p, plan, stream)
                                    : LaunchDtype<false>(p, plan, stream);
}

cudaError_t LaunchSplitKTinyProbe(const LaunchArgs& args, SplitKTinyProbe probe, cudaStream_t stream) {
  const SplitKTinyPlan plan = MakeSplitKTinyPlan(args.k, args.sm_count);
  if (args.dtype != DType::kBF16 || args.m > 16 || args.n > 16) return cudaErrorInvalidValue;
  Params p;
  const cudaError_t err = MakeParams(args, plan, stream, &p);
  if (err != cudaSuccess) return err;
  switch (probe) {
    case SplitKTinyProbe::kStopAfterCtaSum:
      return LaunchTile<1, 2, true, 1>(p, plan, stream);
    case SplitKTinyProbe::kStopAfterClusterSum:
      return LaunchTile<1, 2, true, 2>(p, plan, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchSplitKTiny(const LaunchArgs& args, cudaStream_t stream) {
  return LaunchSplitKTiny(args, MakeSplitKTinyPlan(args.k, args.sm_count), stream);
}

const Launcher kSplitKTiny = {"LaunchSplitKTiny", LaunchSplitKTiny, SplitKTinyWorkspaceBytes,
                              SplitKTinyUnsupported};

}  // namespace arbiter::kernels
