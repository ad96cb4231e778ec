// The wgmma GEMM kernels and their launcher; see wgmma_gemm.h for the design.
#include "kernels/wgmma/wgmma_gemm.h"

#include <algorithm>
#include <atomic>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/hopper.cuh"
#include "kernels/common/stream_counters.h"

namespace arbiter::wgmma {
namespace {

using namespace kernels::hopper;  // mbarriers, TMA, clusters, wgmma descriptors and fences

// 64 16-bit elements = 128 bytes: one row of the 128B swizzle pattern, the
// widest K box TMA can swizzle, and four k16 steps of wgmma per stage.
constexpr int kBlockK = 64;
// The producer needs a handful of registers; the consumers hold up to 128 f32
// accumulators each (m64n256). 128*40 + 256*232 = 64512 <= 65536.
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
constexpr int kGroupM = 16;  // ~sqrt(132 SMs * 2): a near-square block of tiles in flight
constexpr int kMaxSplits = 8;  // portable cluster size

// Epilogue: each consumer stages its 64 rows of C through two 64 x 64 boxes
// (128B-swizzled, 8 KB each) that TMA stores to global memory, so the global
// writes run asynchronously under the next tile's mainloop and TMA clips the
// ragged edges. Two boxes per consumer: one is filled while the other drains.
constexpr int kStoreBoxBytes = 64 * 64 * 2;

// How a config divides K among CTAs. kCluster: the K blocks of a tile are
// split over the CTAs of a thread-block cluster (up to 8), which add their f32
// partials through distributed shared memory in rank order; the reduction
// buffer shares its space with the C staging boxes (a launch uses one or the
// other). kStreamK: units of (tile, k-block) spread over the persistent CTAs,
// partials added through global workspace (wgmma_gemm.h).
enum class KSplit { kNone, kCluster, kStreamK };

template <int kBlockM_, int kBlockN_, int kStages_, KSplit kSplit_ = KSplit::kNone>
struct TileConfig {
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kSplitK = kSplit_ == KSplit::kCluster;
  static constexpr bool kStreamK = kSplit_ == KSplit::kStreamK;
  static constexpr int kConsumers = kBlockM / 64;  // consumer warpgroups; each owns 64 rows
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kABytes = kBlockM * kBlockK * 2;
  // B is K x N row-major (MN-major for wgmma): one TMA box is 64 k-rows x 64
  // columns (128 bytes, one swizzle row), and a stage holds kBlockN / 64 boxes.
  static constexpr int kBChunkBytes = kBlockK * 64 * 2;
  static constexpr int kBChunks = kBlockN / 64;
  static constexpr int kBBytes = kBChunks * kBChunkBytes;
  static constexpr int kAccumulators = kBlockN / 2;  // f32 per thread for m64nN
  static constexpr int kStagingBytes = kConsumers * 2 * kStoreBoxBytes;
  static constexpr int kRedStride = kBlockN + 4;  // floats per partial row (16-byte rows)
  static constexpr int kReduceBytes = kSplitK ? kBlockM * kRedStride * 4 : 0;
  static constexpr int kEpilogueBytes = kStagingBytes > kReduceBytes ? kStagingBytes : kReduceBytes;
  // Stages, the epilogue region, full and empty barriers (+ the split
  // reduction's ready and free barriers), and slack to align the base to 1024.
  static constexpr int kSmemBytes =
      kStages * (kABytes + kBBytes) + kEpilogueBytes + 2 * kStages * 8 + 2 * 8 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "exceeds the sm_90 shared-memory limit per block");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= 65536);
  static_assert(!kSplitK || kConsumers == 1, "split partials are reduced per 64-row warpgroup");
};
// With 32 KB of C staging, 4 stages of 48 KB is all that fits; 6 stages of
// 32 KB hide TMA latency at 128x128. The split tile is for few output tiles
// (M <= 64-ish against a wide weight): B-stream bound, so 4 stages of 32 KB of
// B in flight, one consumer warpgroup.
using Config128x256 = TileConfig<128, 256, 4>;
using Config128x128 = TileConfig<128, 128, 6>;
using Config64x256SplitK = TileConfig<64, 256, 4, KSplit::kCluster>;
// Stream-K: the same stages as the tiles they split (the epilogue region is
// the C staging boxes, which an owner or a whole tile stores through).
using Config64x256StreamK = TileConfig<64, 256, 4, KSplit::kStreamK>;
using Config128x256StreamK = TileConfig<128, 256, 4, KSplit::kStreamK>;
using Config128x128StreamK = TileConfig<128, 128, 6, KSplit::kStreamK>;

// Stream-K flags: one per (CTA, consumer warpgroup), kept per stream
// (kernels/common/stream_counters.h) and left at zero by every launch.
struct StreamKFlags;
constexpr int kStreamKFlags = kWgmmaStreamKMaxCtas * 2;

// ---------------------------------------------------------------- device helpers

// 2-D TMA tile store from shared memory; parts of the box past the tensor are
// not written. Completion is tracked per issuing thread in bulk groups.
__device__ __forceinline__ void TmaStore2d(const CUtensorMap* map, uint32_t src, int inner,
                                           int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(inner), "r"(outer)
      : "memory");
}
__device__ __forceinline__ void BulkCommit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Waits until at most kPending of this thread's bulk groups still read shared memory.
template <int kPending>
__device__ __forceinline__ void BulkWaitRead() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void BulkWaitAll() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
// Barrier over one warpgroup (ids 1.. ; 0 is __syncthreads).
__device__ __forceinline__ void WarpgroupBarrier(int id) {
  asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory");
}
__device__ __forceinline__ void StoreShared(uint32_t addr, uint32_t value) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(value) : "memory");
}
// Waits for a barrier phase completed by arrivals from other CTAs of the
// cluster (acquire at cluster scope: their prior shared-memory writes are visible).
__device__ __forceinline__ void BarrierWaitCluster(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}
// Arrives (release at cluster scope) on a barrier in another CTA of the cluster.
__device__ __forceinline__ void BarrierArriveRemote(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar)
               : "memory");
}
__device__ __forceinline__ void StoreShared2(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(x), "f"(y) : "memory");
}
// 4-byte global->shared copy; zero-filled past src_bytes (0 or 4).
__device__ __forceinline__ void CpAsync4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

// Stream-K flags, at GPU scope: raised with release after the partial's
// stores (ordered before it by the warpgroup barrier), waited for with acquire.
__device__ __forceinline__ void RaiseFlag(unsigned* flag) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(1u) : "memory");
}
__device__ __forceinline__ void WaitFlag(const unsigned* flag) {
  unsigned v = 0;
  for (unsigned backoff = 32;; backoff = backoff < 1024 ? 2 * backoff : backoff) {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
    if (v != 0) return;
    __nanosleep(backoff);
  }
}

template <int kBlockN, bool kBf16>
__device__ __forceinline__ void Mma(float (&d)[kBlockN / 2], uint64_t desc_a, uint64_t desc_b,
                                    uint32_t scale_d) {
  if constexpr (kBlockN == 256) {
    Mma64x256<kBf16>(d, desc_a, desc_b, scale_d);
  } else {
    static_assert(kBlockN == 128);
    Mma64x128<kBf16>(d, desc_a, desc_b, scale_d);
  }
}

// ---------------------------------------------------------------- the kernel

// kCpAsyncB: B is copied by the producer warpgroup's 128 threads with 4-byte
// cp.async into the same 128B-swizzled layout TMA would write, and C is
// stored straight from the accumulators: neither needs a 16-byte row stride,
// so any even N runs with no padded copy (b and c are read then; the B and C
// tensor maps are not).
//
// Split configs (Cfg::kSplitK) with splits > 1 run in clusters of `splits`
// CTAs along x: cluster blockIdx.x / splits walks the tiles, and rank r =
// blockIdx.x % splits computes k-blocks [r * kb_per_split, (r + 1) *
// kb_per_split) of each; the partials meet in distributed shared memory.
//
// Stream-K configs (Cfg::kStreamK) walk their unit range instead (wgmma_gemm.h);
// `partials` holds gridDim.x slots of kBlockM x kBlockN floats and `flags`
// gridDim.x x kConsumers zeroed words.
template <class Cfg, bool kBf16, bool kCpAsyncB>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    WgmmaGemmKernel(const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b,
                    const __grid_constant__ CUtensorMap map_c, int m, int n, int k,
                    const uint16_t* __restrict__ b, uint16_t* __restrict__ c, int splits,
                    int kb_per_split, float* __restrict__ partials, unsigned* __restrict__ flags) {
  constexpr int kStages = Cfg::kStages;
  constexpr int kBlockN = Cfg::kBlockN;
  constexpr int kBlockM = Cfg::kBlockM;
  constexpr int kConsumers = Cfg::kConsumers;
  extern __shared__ uint8_t smem_raw[];
  // The 128B swizzle pattern repeats every 1024 bytes and wgmma descriptors
  // assume each stage starts on that boundary.
  const uint32_t base = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const uint32_t a_base = base;
  const uint32_t b_base = a_base + kStages * Cfg::kABytes;
  const uint32_t staging_base = b_base + kStages * Cfg::kBBytes;  // C boxes, 1024-aligned
  const uint32_t full_base = staging_base + Cfg::kEpilogueBytes;  // TMA bytes landed
  const uint32_t empty_base = full_base + kStages * 8;         // consumers done reading
  // Split reduction: every rank's partial is in (ready), every rank has read
  // this CTA's partial (free). `splits` arrivals each, from across the cluster.
  const uint32_t red_ready = empty_base + kStages * 8;
  const uint32_t red_free = red_ready + 8;
  const bool split = Cfg::kSplitK && splits > 1;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      // The producer's expect_tx arrival, and with kCpAsyncB one cp.async
      // arrival per producer thread.
      BarrierInit(full_base + 8 * s, kCpAsyncB ? 1 + 128 : 1);
      BarrierInit(empty_base + 8 * s, kConsumers * 4);     // one arrival per consumer warp
    }
    if (split) {
      BarrierInit(red_ready, splits);
      BarrierInit(red_free, splits);
    }
    // Make the initialized barriers visible to the async proxy (TMA).
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  // No CTA arrives on another's barriers before they are initialized.
  if (split) ClusterSync();
  const int rank = split ? static_cast<int>(blockIdx.x) % splits : 0;
  const int first_tile = split ? static_cast<int>(blockIdx.x) / splits : static_cast<int>(blockIdx.x);
  const int tile_step = split ? static_cast<int>(gridDim.x) / splits : static_cast<int>(gridDim.x);

  const int tiles_m = (m + kBlockM - 1) / kBlockM;
  const int tiles_n = (n + kBlockN - 1) / kBlockN;
  const int tiles = tiles_m * tiles_n;
  const int k_blocks = (k + kBlockK - 1) / kBlockK;
  const int kb_begin = split ? rank * kb_per_split : 0;
  const int kb_end = split ? min(k_blocks, kb_begin + kb_per_split) : k_blocks;
  const int warpgroup = threadIdx.x / 128;
  // This CTA's segments; the producer and the consumers each walk a copy.
  const WgmmaSegmentWalk work =
      Cfg::kStreamK
          ? WgmmaSegmentWalk::StreamK(static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), tiles, k_blocks)
          : WgmmaSegmentWalk::Tiles(first_tile, tile_step, tiles, kb_begin, kb_end);

  if (warpgroup == 0) {
    // Producer: one thread issues every TMA load; the rest of the warpgroup
    // only gives its registers back to the consumers.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    if constexpr (!kCpAsyncB) {
      if (threadIdx.x == 0) {
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
        int it = 0;  // k-blocks issued by this CTA, across tiles: stage = it % kStages
        WgmmaSegmentWalk walk = work;
        for (WgmmaSegment seg; walk.Next(&seg);) {
          int m_tile, n_tile;
          WgmmaTileAt(seg.tile, tiles_m, tiles_n, kGroupM, &m_tile, &n_tile);
          const int m0 = m_tile * kBlockM;
          const int n0 = n_tile * kBlockN;
          // B boxes wholly past N are skipped: those columns are never stored,
          // and each column of C depends only on the same column of B.
          const int chunks_left = (n - n0 + 63) / 64;
          const int chunks = chunks_left < Cfg::kBChunks ? chunks_left : Cfg::kBChunks;
          const uint32_t bytes = Cfg::kABytes + chunks * Cfg::kBChunkBytes;
          for (int kb = seg.kb_lo; kb < seg.kb_hi; ++kb, ++it) {
            const int s = it % kStages;
            BarrierWait(empty_base + 8 * s, ((it / kStages) & 1) ^ 1);
            const uint32_t full = full_base + 8 * s;
            BarrierExpectTx(full, bytes);
            TmaLoad2d(a_base + s * Cfg::kABytes, &map_a, full, kb * kBlockK, m0);
            for (int j = 0; j < chunks; ++j) {
              TmaLoad2d(b_base + s * Cfg::kBBytes + j * Cfg::kBChunkBytes, &map_b, full,
                        n0 + 64 * j, kb * kBlockK);
            }
          }
        }
      }
    } else {
      // Thread t copies column pair p = t % (kBlockN / 2) of k rows t / (kBlockN / 2),
      // + 128 / (kBlockN / 2), ...: a warp covers 128 contiguous bytes of a B row.
      // Element (r, col) of a 64-column box lands at row r * 128 + 16-byte
      // chunk (col / 8) ^ (r % 8), the TMA 128B swizzle. Rows past K are
      // zero-filled (they would add to real outputs); columns past N too.
      constexpr int kPairs = kBlockN / 2;
      constexpr int kRowStep = 128 / kPairs;
      const int t = threadIdx.x;
      const int pair = t % kPairs;
      const int first_row = t / kPairs;
      const int box_col = (2 * pair) % 64;
      const uint32_t col_offset = (2 * pair) / 64 * Cfg::kBChunkBytes + (box_col % 8) * 2;
      const uint32_t chunk = box_col / 8;
      if (t == 0) {
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
      }
      int it = 0;
      WgmmaSegmentWalk walk = work;
      for (WgmmaSegment seg; walk.Next(&seg);) {
        int m_tile, n_tile;
        WgmmaTileAt(seg.tile, tiles_m, tiles_n, kGroupM, &m_tile, &n_tile);
        const int m0 = m_tile * kBlockM;
        const int col = n_tile * kBlockN + 2 * pair;
        const bool col_ok = col < n;
        for (int kb = seg.kb_lo; kb < seg.kb_hi; ++kb, ++it) {
          const int s = it % kStages;
          // Every copying thread waits until the consumers have freed the stage.
          BarrierWait(empty_base + 8 * s, ((it / kStages) & 1) ^ 1);
          const uint32_t full = full_base + 8 * s;
          if (t == 0) {
            BarrierExpectTx(full, Cfg::kABytes);
            TmaLoad2d(a_base + s * Cfg::kABytes, &map_a, full, kb * kBlockK, m0);
          }
          const uint32_t dst = b_base + s * Cfg::kBBytes + col_offset;
#pragma unroll 4
          for (int r = first_row; r < kBlockK; r += kRowStep) {
            const int row = kb * kBlockK + r;
            const bool ok = col_ok && row < k;
            const uint16_t* src = ok ? b + static_cast<int64_t>(row) * n + col : b;
            CpAsync4(dst + r * 128 + ((chunk ^ (r & 7)) << 4), src, ok ? 4 : 0);
          }
          // Arrives on `full` once this thread's copies have landed.
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full) : "memory");
        }
      }
      // No copy of this thread is left in flight when it exits.
      asm volatile("cp.async.wait_all;" ::: "memory");
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
    const int consumer = warpgroup - 1;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    const bool leader = threadIdx.x % 128 == 0;  // issues this warpgroup's C stores
    float acc[Cfg::kAccumulators];
#pragma unroll
    for (int i = 0; i < Cfg::kAccumulators; ++i) acc[i] = 0.0f;

    int it = 0;
    int tiles_done = 0;  // split reduction phases completed by this CTA
    WgmmaSegmentWalk walk = work;
    for (WgmmaSegment seg; walk.Next(&seg);) {
      int m_tile, n_tile;
      WgmmaTileAt(seg.tile, tiles_m, tiles_n, kGroupM, &m_tile, &n_tile);
      for (int kb = seg.kb_lo; kb < seg.kb_hi; ++kb, ++it) {
        const int s = it % kStages;
        BarrierWait(full_base + 8 * s, (it / kStages) & 1);
        if constexpr (kCpAsyncB) {
          // B was written by cp.async (the generic proxy); wgmma reads through
          // the async proxy.
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        }
        const uint32_t a_stage = a_base + s * Cfg::kABytes + consumer * 64 * 128;
        const uint32_t b_stage = b_base + s * Cfg::kBBytes;
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kBlockK / 16; ++kk) {
          // k16 step: +32 bytes along A's swizzled 128-byte rows; +16 k-rows
          // (2048 bytes) down B's boxes.
          const uint64_t desc_a = SmemDesc(a_stage + 32 * kk, 16, 1024);
          const uint64_t desc_b = SmemDesc(b_stage + 2048 * kk, Cfg::kBChunkBytes, 1024);
          Mma<kBlockN, kBf16>(acc, desc_a, desc_b, (kb != seg.kb_lo || kk != 0) ? 1u : 0u);
        }
        WgmmaCommit();
        if (kb > seg.kb_lo) {
          // Keep this k-block's wgmma in flight; the previous one has finished
          // reading its stage, so hand that stage back to the producer.
          WgmmaWait<1>();
          if (lane == 0) BarrierArrive(empty_base + 8 * ((it - 1) % kStages));
        }
      }
      WgmmaWait<0>();
      FenceAccumulators(acc);
      if (lane == 0) BarrierArrive(empty_base + 8 * ((it - 1) % kStages));

      if constexpr (Cfg::kStreamK) {
        // Partials in fragment order: float4 j of thread t of warpgroup w at
        // (w * kQuads + j) * 128 + t of the CTA's slot, so each thread moves
        // its own registers and a warp's float4s are 512 contiguous bytes.
        // L2 only (.cg): written once, read once by another SM.
        constexpr int kQuads = Cfg::kAccumulators / 4;
        constexpr size_t kSlotQuads = size_t{kBlockM} * kBlockN / 4;
        const int t = threadIdx.x % 128;
        const int units = tiles * k_blocks;
        if (seg.kb_lo > 0) {
          // A contributor (this CTA's first segment): partial out, flag up.
          float4* slot = reinterpret_cast<float4*>(partials) + blockIdx.x * kSlotQuads +
                         consumer * kQuads * 128 + t;
#pragma unroll
          for (int j = 0; j < kQuads; ++j) {
            __stcg(slot + j * 128, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
          }
          WarpgroupBarrier(1 + consumer);
          if (leader) RaiseFlag(flags + blockIdx.x * kConsumers + consumer);
          continue;
        }
        if (seg.kb_hi < k_blocks) {
          // The owner (this CTA's last segment): the tile's later k-blocks are
          // partials of the next CTAs up to the one holding its last unit,
          // added in CTA order; each flag goes back to zero for the next launch.
          const int last = WgmmaStreamKCtaOf(seg.tile * k_blocks + k_blocks - 1,
                                             static_cast<int>(gridDim.x), units);
          for (int q = static_cast<int>(blockIdx.x) + 1; q <= last; ++q) {
            unsigned* flag = flags + q * kConsumers + consumer;
            if (leader) {
              WaitFlag(flag);
              *flag = 0;
            }
            WarpgroupBarrier(1 + consumer);
            const float4* slot = reinterpret_cast<const float4*>(partials) + q * kSlotQuads +
                                 consumer * kQuads * 128 + t;
#pragma unroll
            for (int j = 0; j < kQuads; ++j) {
              const float4 v = __ldcg(slot + j * 128);
              acc[4 * j] += v.x;
              acc[4 * j + 1] += v.y;
              acc[4 * j + 2] += v.z;
              acc[4 * j + 3] += v.w;
            }
          }
        }
      }

      if constexpr (Cfg::kSplitK) {
        if (split) {
          // 1. This CTA's partial, f32, into its reduction buffer, once every
          //    rank has read the previous tile's.
          if (tiles_done > 0) BarrierWaitCluster(red_free, (tiles_done - 1) & 1);
          const int r = warp * 16 + lane / 4;
#pragma unroll
          for (int j = 0; j < kBlockN / 8; ++j) {
            const uint32_t at = staging_base + (r * Cfg::kRedStride + 8 * j + 2 * (lane % 4)) * 4;
            StoreShared2(at, acc[4 * j], acc[4 * j + 1]);
            StoreShared2(at + 8 * Cfg::kRedStride * 4, acc[4 * j + 2], acc[4 * j + 3]);
          }
          WarpgroupBarrier(1);
          // 2. Tell every rank it is there (release at cluster scope).
          if (leader) {
            asm volatile("fence.acq_rel.cluster;" ::: "memory");
            for (int q = 0; q < splits; ++q) BarrierArriveRemote(MapRank(red_ready, q));
          }
          // 3. Once all partials are in, this rank adds its share of the rows
          //    over ranks 0, 1, ... in that order and stores them.
          BarrierWaitCluster(red_ready, tiles_done & 1);
          const int share = (kBlockM + splits - 1) / splits;
          const int row_lo = rank * share;
          const int row_hi = min(kBlockM, row_lo + share);
          const int quads = kBlockN / 4;
          for (int idx = threadIdx.x % 128; idx < (row_hi - row_lo) * quads; idx += 128) {
            const int row = row_lo + idx / quads;
            const int col4 = idx % quads;
            const uint32_t at = staging_base + (row * Cfg::kRedStride + 4 * col4) * 4;
            float4 sum = LoadCluster4(MapRank(at, 0));
            for (int q = 1; q < splits; ++q) {
              const float4 v = LoadCluster4(MapRank(at, q));
              sum.x += v.x;
              sum.y += v.y;
              sum.z += v.z;
              sum.w += v.w;
            }
            const int grow = m_tile * kBlockM + row;
            const int gcol = n_tile * kBlockN + 4 * col4;
            // N % 8 == 0 (TMA B): a quad starting inside C lies wholly inside.
            if (grow < m && gcol < n) {
              const uint2 packed = make_uint2(PackPair<kBf16>(sum.x, sum.y), PackPair<kBf16>(sum.z, sum.w));
              *reinterpret_cast<uint2*>(c + static_cast<int64_t>(grow) * n + gcol) = packed;
            }
          }
          // 4. Done reading every rank's buffer for this tile.
          WarpgroupBarrier(1);
          if (leader) {
            for (int q = 0; q < splits; ++q) BarrierArriveRemote(MapRank(red_free, q));
          }
          ++tiles_done;
          continue;
        }
      }

      if constexpr (kCpAsyncB) {
        // Straight from the accumulators: rows r and r + 8, two adjacent columns
        // per 8-column chunk, one 4-byte store each (N even keeps them aligned).
        const int row = m_tile * kBlockM + consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) {
          const int col = n_tile * kBlockN + 8 * j + 2 * (lane % 4);
          if (col >= n) continue;
          if (row < m) {
            *reinterpret_cast<uint32_t*>(c + static_cast<int64_t>(row) * n + col) =
                PackPair<kBf16>(acc[4 * j], acc[4 * j + 1]);
          }
          if (row + 8 < m) {
            *reinterpret_cast<uint32_t*>(c + static_cast<int64_t>(row + 8) * n + col) =
                PackPair<kBf16>(acc[4 * j + 2], acc[4 * j + 3]);
          }
        }
        continue;
      }
      // Epilogue, one 64 x 64 box at a time. The m64nN accumulator layout gives
      // each thread rows r and r + 8 (r = 16 * warp + lane / 4) and, in each
      // 8-column chunk j, columns 2 * (lane % 4) and + 1: one 4-byte word of
      // 16-byte chunk j % 8 of the box row. The 128B swizzle puts chunk c of
      // row r at c ^ (r % 8), which also spreads a warp's 8 rows over all banks.
      const int m_box = m_tile * kBlockM + consumer * 64;
      const int r = warp * 16 + lane / 4;
      const uint32_t word = 4 * (lane % 4);
#pragma unroll
      for (int q = 0; q < kBlockN / 64; ++q) {
        const int n_box = n_tile * kBlockN + 64 * q;
        if (m_box >= m || n_box >= n) continue;  // wholly outside C (uniform per warpgroup)
        const uint32_t box = staging_base + (consumer * 2 + (q & 1)) * kStoreBoxBytes;
        // The store issued two boxes ago read this buffer: wait until it has.
        if (leader) BulkWaitRead<1>();
        WarpgroupBarrier(1 + consumer);
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          const int j = 8 * q + jj;
          const uint32_t chunk = static_cast<uint32_t>(jj ^ (r % 8)) * 16 + word;
          StoreShared(box + r * 128 + chunk, PackPair<kBf16>(acc[4 * j], acc[4 * j + 1]));
          StoreShared(box + (r + 8) * 128 + chunk, PackPair<kBf16>(acc[4 * j + 2], acc[4 * j + 3]));
        }
        // Ordinary shared stores read next by TMA: fence to the async proxy in
        // every writing thread, then the barrier, then one thread stores.
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        WarpgroupBarrier(1 + consumer);
        if (leader) {
          TmaStore2d(&map_c, box, n_box, m_box);
          BulkCommit();
        }
      }
    }
    // Shared memory must outlive the reads of the last stores, and of the
    // other ranks' reads of the last partial.
    if (leader) BulkWaitAll();
    if (split && tiles_done > 0) BarrierWaitCluster(red_free, (tiles_done - 1) & 1);
  }
}

// ---------------------------------------------------------------- host side

// A row-major [outer, inner] 16-bit tensor, boxes of box_outer x box_inner, 128B swizzle.
cudaError_t EncodeTensorMap(CUtensorMap* map, WgmmaDType dtype, const void* data, int64_t inner,
                            int64_t outer, uint32_t box_inner, uint32_t box_outer) {
  return kernels::hopper::EncodeTensorMap16(map, dtype == WgmmaDType::kBF16, data, inner, outer,
                                            box_inner, box_outer);
}

// Raises the kernel's dynamic shared-memory limit once per device and says how
// many of its CTAs the device holds at once (SMs x CTAs per SM: the stream-K
// owners wait on other CTAs, so its grid must not exceed that). Templated on
// the instantiation (not the kernel's type, which all instantiations share) so
// each kernel keeps its own record.
template <class Cfg, bool kBf16, bool kCpAsyncB>
cudaError_t PrepareKernel(int* resident_ctas) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> known[kMaxDevices] = {};  // resident CTAs + 1; 0: not asked yet
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < kMaxDevices) {
    const int v = known[device].load(std::memory_order_acquire);
    if (v > 0) {
      *resident_ctas = v - 1;
      return cudaSuccess;
    }
  }
  auto* kernel = WgmmaGemmKernel<Cfg, kBf16, kCpAsyncB>;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  int per_sm = 0, sms = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Cfg::kThreads, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  *resident_ctas = per_sm * sms;
  if (device < kMaxDevices) known[device].store(*resident_ctas + 1, std::memory_order_release);
  return cudaSuccess;
}

template <class Cfg, bool kBf16, bool kCpAsyncB>
cudaError_t LaunchConfig(const WgmmaGemmArgs& args, const WgmmaGeometry& geometry,
                         cudaStream_t stream) {
  int resident_ctas = 0;
  cudaError_t err = PrepareKernel<Cfg, kBf16, kCpAsyncB>(&resident_ctas);
  if (err != cudaSuccess) return err;
  float* partials = nullptr;
  unsigned* flags = nullptr;
  if constexpr (Cfg::kStreamK) {
    // Every CTA must be resident at once (owners spin on others' flags).
    if (resident_ctas < 1 || geometry.grid_x > resident_ctas) return cudaErrorCooperativeLaunchTooLarge;
    err = kernels::StreamArrivalCounters<StreamKFlags, kStreamKFlags>(stream, &flags);
    if (err != cudaSuccess) return err;
    partials = static_cast<float*>(args.workspace);
  }
  CUtensorMap map_a, map_b, map_c;
  err = EncodeTensorMap(&map_a, args.dtype, args.a, args.k, args.m, kBlockK, Cfg::kBlockM);
  if (err != cudaSuccess) return err;
  if constexpr (kCpAsyncB) {
    // Not read by the kernel (B and C go through cp.async and plain stores).
    map_b = map_a;
    map_c = map_a;
  } else {
    err = EncodeTensorMap(&map_b, args.dtype, args.b, args.n, args.k, 64, kBlockK);
    if (err != cudaSuccess) return err;
    err = EncodeTensorMap(&map_c, args.dtype, args.c, args.n, args.m, 64, 64);
    if (err != cudaSuccess) return err;
  }
  const auto* b = static_cast<const uint16_t*>(args.b);
  auto* c = static_cast<uint16_t*>(args.c);
  const int m = static_cast<int>(args.m), n = static_cast<int>(args.n), k = static_cast<int>(args.k);
  auto* kernel = &WgmmaGemmKernel<Cfg, kBf16, kCpAsyncB>;
  if (geometry.splits == 1) {
    kernel<<<geometry.grid_x, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(
        map_a, map_b, map_c, m, n, k, b, c, 1, 0, partials, flags);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(geometry.grid_x));
  config.blockDim = dim3(Cfg::kThreads);
  config.dynamicSmemBytes = Cfg::kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute cluster[1];
  cluster[0].id = cudaLaunchAttributeClusterDimension;
  cluster[0].val.clusterDim.x = static_cast<unsigned>(geometry.splits);
  cluster[0].val.clusterDim.y = 1;
  cluster[0].val.clusterDim.z = 1;
  config.attrs = cluster;
  config.numAttrs = 1;
  // A GPC holds only so many clusters of `splits` SMs: the persistent grid
  // asks for no more than are co-resident (once per split count; the clusters
  // walk the tiles whatever their number).
  static std::atomic<int> resident[kMaxSplits + 1] = {};
  int clusters = resident[geometry.splits].load(std::memory_order_relaxed);
  if (clusters == 0) {
    err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
    if (err != cudaSuccess) return err;
    clusters = std::max(clusters, 1);
    resident[geometry.splits].store(clusters, std::memory_order_relaxed);
  }
  config.gridDim.x = static_cast<unsigned>(std::min(geometry.grid_x / geometry.splits, clusters) *
                                           geometry.splits);
  err = cudaLaunchKernelEx(&config, kernel, map_a, map_b, map_c, m, n, k, b, c, geometry.splits,
                           geometry.kb_per_split, partials, flags);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

template <bool kBf16>
cudaError_t LaunchDType(const WgmmaGemmArgs& args, const WgmmaGeometry& geometry,
                        cudaStream_t stream) {
  switch (args.tile) {
    case WgmmaTile::k128x128:
      return LaunchConfig<Config128x128, kBf16, false>(args, geometry, stream);
    case WgmmaTile::k128x256:
      return LaunchConfig<Config128x256, kBf16, false>(args, geometry, stream);
    case WgmmaTile::k128x128CpAsync:
      return LaunchConfig<Config128x128, kBf16, true>(args, geometry, stream);
    case WgmmaTile::k128x256CpAsync:
      return LaunchConfig<Config128x256, kBf16, true>(args, geometry, stream);
    case WgmmaTile::k64x256SplitK:
      return LaunchConfig<Config64x256SplitK, kBf16, false>(args, geometry, stream);
    case WgmmaTile::k64x256StreamK:
      return LaunchConfig<Config64x256StreamK, kBf16, false>(args, geometry, stream);
    case WgmmaTile::k128x256StreamK:
      return LaunchConfig<Config128x256StreamK, kBf16, false>(args, geometry, stream);
    case WgmmaTile::k128x128StreamK:
      return LaunchConfig<Config128x128StreamK, kBf16, false>(args, geometry, stream);
  }
  return cudaErrorInvalidValue;
}

bool Aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// The persistent grid's width: args.num_sms, or the current device's SM count.
cudaError_t SmCount(const WgmmaGemmArgs& args, int* num_sms) {
  *num_sms = args.num_sms;
  if (*num_sms > 0) return cudaSuccess;
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  return cudaDeviceGetAttribute(num_sms, cudaDevAttrMultiProcessorCount, device);
}

}  // namespace

const char* WgmmaTileName(WgmmaTile tile) {
  switch (tile) {
    case WgmmaTile::k128x128:
      return "128x128";
    case WgmmaTile::k128x256:
      return "128x256";
    case WgmmaTile::k128x128CpAsync:
      return "128x128_cpasync";
    case WgmmaTile::k128x256CpAsync:
      return "128x256_cpasync";
    case WgmmaTile::k64x256SplitK:
      return "64x256_splitk";
    case WgmmaTile::k64x256StreamK:
      return "64x256_streamk";
    case WgmmaTile::k128x256StreamK:
      return "128x256_streamk";
    case WgmmaTile::k128x128StreamK:
      return "128x128_streamk";
  }
  return "unknown";
}

int WgmmaTileM(WgmmaTile tile) {
  return tile == WgmmaTile::k64x256SplitK || tile == WgmmaTile::k64x256StreamK
             ? Config64x256SplitK::kBlockM
             : Config128x256::kBlockM;
}

int WgmmaTileN(WgmmaTile tile) {
  return tile == WgmmaTile::k128x128 || tile == WgmmaTile::k128x128CpAsync ||
                 tile == WgmmaTile::k128x128StreamK
             ? Config128x128::kBlockN
             : Config128x256::kBlockN;
}

bool WgmmaTileCopiesB(WgmmaTile tile) {
  return tile == WgmmaTile::k128x128CpAsync || tile == WgmmaTile::k128x256CpAsync;
}

bool WgmmaTileSplitsK(WgmmaTile tile) { return tile == WgmmaTile::k64x256SplitK; }

bool WgmmaTileStreamK(WgmmaTile tile) {
  return tile == WgmmaTile::k64x256StreamK || tile == WgmmaTile::k128x256StreamK ||
         tile == WgmmaTile::k128x128StreamK;
}

WgmmaGeometry WgmmaLaunchGeometry(WgmmaTile tile, int64_t m, int64_t n, int64_t k, int num_sms) {
  WgmmaGeometry g;
  g.tile_m = WgmmaTileM(tile);
  g.tile_n = WgmmaTileN(tile);
  g.tiles_m = static_cast<int>((m + g.tile_m - 1) / g.tile_m);
  g.tiles_n = static_cast<int>((n + g.tile_n - 1) / g.tile_n);
  g.group_m = kGroupM;
  const int sms = num_sms > 0 ? num_sms : 1;
  const int k_blocks = static_cast<int>((k + kBlockK - 1) / kBlockK);
  g.k_blocks = k_blocks;
  if (WgmmaTileStreamK(tile)) {
    g.stream_k = true;
    g.grid_x = static_cast<int>(std::min<int64_t>({sms, g.units(), kWgmmaStreamKMaxCtas}));
    return g;
  }
  if (WgmmaTileSplitsK(tile)) {
    // The split count whose clusters finish soonest: rounds of tiles over the
    // clusters that fit the SMs, times the k-blocks each rank walks; a tie
    // keeps fewer splits (less to add up).
    int64_t best = -1;
    for (int s = 1; s <= kMaxSplits && s <= sms && s <= k_blocks; ++s) {
      const int per = (k_blocks + s - 1) / s;
      const int used = (k_blocks + per - 1) / per;  // ranks that get k-blocks
      if (used != s) continue;
      const int64_t clusters = std::min<int64_t>(g.tiles(), sms / s);
      const int64_t rounds = (g.tiles() + clusters - 1) / clusters;
      const int64_t cost = rounds * per;
      if (best < 0 || cost < best) {
        best = cost;
        g.splits = s;
        g.kb_per_split = per;
      }
    }
    g.grid_x = static_cast<int>(std::min<int64_t>(g.tiles(), sms / g.splits)) * g.splits;
    return g;
  }
  g.grid_x = g.tiles() < sms ? g.tiles() : sms;
  return g;
}

const char* WgmmaUnsupportedReason(const WgmmaGemmArgs& args) {
  if (args.m < 1 || args.n < 1 || args.k < 1) return "M, N and K must be at least 1";
  // Tile counts and row indices are 32-bit in the kernel; TMA dims are < 2^32.
  constexpr int64_t kMaxDim = int64_t{1} << 30;
  if (args.m > kMaxDim || args.n > kMaxDim || args.k > kMaxDim) return "a dimension exceeds 2^30";
  if (args.k % 8 != 0) return "K must be a multiple of 8 (TMA needs 16-byte row strides for A)";
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) return "null operand";
  if (!Aligned(args.a, 16)) return "A must be 16-byte aligned for TMA";
  switch (args.tile) {
    case WgmmaTile::k128x128:
    case WgmmaTile::k128x256:
    case WgmmaTile::k64x256SplitK:
    case WgmmaTile::k64x256StreamK:
    case WgmmaTile::k128x256StreamK:
    case WgmmaTile::k128x128StreamK:
      if (args.n % 8 != 0) return "N must be a multiple of 8 (TMA needs 16-byte row strides for B)";
      if (!Aligned(args.b, 16) || !Aligned(args.c, 16)) return "B and C must be 16-byte aligned for TMA";
      break;
    case WgmmaTile::k128x128CpAsync:
    case WgmmaTile::k128x256CpAsync:
      if (args.n % 2 != 0) return "N must be even (B is copied and C stored 4 bytes at a time)";
      if (!Aligned(args.b, 4) || !Aligned(args.c, 4)) return "B and C must be 4-byte aligned";
      break;
    default:
      return "unknown tile";
  }
  if (args.dtype != WgmmaDType::kF16 && args.dtype != WgmmaDType::kBF16) return "unknown dtype";
  if (WgmmaTileStreamK(args.tile)) {
    // Unit indices are 32-bit in the kernel.
    const auto ceil_div = [](int64_t x, int64_t y) { return (x + y - 1) / y; };
    const int64_t tiles = ceil_div(args.m, WgmmaTileM(args.tile)) * ceil_div(args.n, WgmmaTileN(args.tile));
    if (tiles >= int64_t{1} << 31 || tiles * ceil_div(args.k, kBlockK) >= int64_t{1} << 31) {
      return "stream-K units (tiles x 64-deep k-blocks) reach 2^31";
    }
  }
  return nullptr;
}

size_t WgmmaWorkspaceBytes(const WgmmaGemmArgs& args) {
  if (!WgmmaTileStreamK(args.tile)) return 0;
  int num_sms = 0;
  if (SmCount(args, &num_sms) != cudaSuccess) return 0;  // the launch reports the error
  return WgmmaLaunchGeometry(args.tile, args.m, args.n, args.k, num_sms).workspace_bytes();
}

cudaError_t LaunchWgmmaGemm(const WgmmaGemmArgs& args, cudaStream_t stream) {
  if (WgmmaUnsupportedReason(args) != nullptr) return cudaErrorInvalidValue;
  int num_sms = 0;
  const cudaError_t err = SmCount(args, &num_sms);
  if (err != cudaSuccess) return err;
  const WgmmaGeometry geometry = WgmmaLaunchGeometry(args.tile, args.m, args.n, args.k, num_sms);
  const size_t workspace = geometry.workspace_bytes();
  if (workspace > 0 && (args.workspace == nullptr || args.workspace_bytes < workspace ||
                        !Aligned(args.workspace, 16))) {
    return cudaErrorInvalidValue;
  }
  return args.dtype == WgmmaDType::kBF16 ? LaunchDType<true>(args, geometry, stream)
                                         : LaunchDType<false>(args, geometry, stream);
}

}  // namespace arbiter::wgmma
