// The wgmma_ragged kernel and its launcher; wgmma_ragged.h has the design.
#include "kernels/wgmma_ragged/wgmma_ragged.h"

#include <atomic>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/hopper.cuh"

namespace arbiter::kernels {
namespace {

using namespace hopper;  // mbarriers, TMA, wgmma descriptors and fences

constexpr int kBlockM = kWgmmaRaggedTileM;
constexpr int kBlockN = kWgmmaRaggedTileN;
// 64 16-bit elements = 128 bytes: one row of the 128B swizzle pattern, the
// widest K box TMA can swizzle for A, and four k16 steps of wgmma per stage.
constexpr int kBlockK = 64;
// A stage is 16 KB of A and 32 KB of B; C needs no staging (stored from
// registers), so 4 stages fit in the 227 KB of shared memory.
constexpr int kStages = 4;
constexpr int kConsumers = kBlockM / 64;  // consumer warpgroups, 64 rows of C each
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kABytes = kBlockM * kBlockK * 2;
// B is K x N row-major (MN-major for wgmma): a stage holds kBlockN / 64 boxes
// of 64 k-rows x 64 columns (128 bytes, one swizzle row, per k-row).
constexpr int kBBoxBytes = kBlockK * 64 * 2;
constexpr int kBBytes = kBlockN / 64 * kBBoxBytes;
// Each producer warp realigns 16 of the 64 k-rows of a stage. The 33rd chunk
// of those rows' spans (needed only by lane 31) goes by cp.async into a small
// slot per warp (16 rows x 16 bytes), double-buffered: the next k-block's
// chunks travel while this one's are read, and take no registers.
constexpr int kRowsPerWarp = kBlockK / 4;
constexpr int kExtraSlotBytes = 4 * kRowsPerWarp * 16;  // all 4 producer warps
constexpr int kSmemBytes =
    kStages * (kABytes + kBBytes) + 2 * kStages * 8 + 2 * kExtraSlotBytes + 1024;
static_assert(kSmemBytes <= 227 * 1024, "exceeds the sm_90 shared-memory limit per block");
// A 256-column row of a B tile is 32 16-byte chunks: one per lane.
static_assert(kBlockN == 256, "the producer maps one lane to each 16-byte chunk of a B row");
// Registers, moved from the producer to the consumers by setmaxnreg: the
// kernel starts with 168 per thread (65536 / 384, rounded down to 8), and
// 128 * 120 + 256 * 192 = 64512 = 384 * 168. A producer thread holds one
// chunk of each of its warp's 16 rows in flight (64 registers; 32 KB per SM,
// a whole stage of B, what an L2 round trip at the wgmma rate needs); the
// consumers hold 128 f32 accumulators each (m64n256).
constexpr int kProducerRegs = 120;
constexpr int kConsumerRegs = 192;
static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= 168 * kThreads);

// ---------------------------------------------------------------- device helpers

// The k-rows one producer warp realigns for one k-block: rows row0 ..
// row0 + 15 of B from column n0. Row j starts at byte first + 2Nj; its
// aligned-down span (its 33 16-byte chunks) starts `shift` = that address mod
// 16 bytes earlier, the same misalignment all along the row (B is 16-byte
// aligned); no chunk that starts `room` + shift bytes or more into the span
// holds anything of the row.
struct BlockRows {
  const uint8_t* first;  // (row0, n0) in B
  int rows;              // K - row0: row j is inside K iff j < rows (0: no such k-block)
  uint32_t room;         // 2 (N - n0): bytes from a row's start to its end
};

__device__ __forceinline__ BlockRows RowsOf(const uint8_t* b, bool live, int row0, int n, int n0,
                                            int k) {
  BlockRows br;
  br.rows = live ? k - row0 : 0;
  br.first = b + 2 * (static_cast<int64_t>(live ? row0 : 0) * n + n0);
  br.room = 2u * static_cast<uint32_t>(n - n0);
  return br;
}

// The 16-byte chunk of B at `at` (16-byte aligned) where `pred`, else zeros,
// as one predicated load: no branch, and nothing read where !pred. No load
// passes B's end: K % 8 == 0 makes B's size 2KN a multiple of 16, so a chunk
// that starts inside B ends inside it. B is read by the M tiles in flight
// from L2; nothing is kept in L1.
__device__ __forceinline__ uint4 LoadChunkIf(const uint8_t* at, bool pred) {
  uint4 v;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n"
      "mov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\nmov.b32 %3, 0;\n"
      "@p ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
      : "=&r"(v.x), "=&r"(v.y), "=&r"(v.z), "=&r"(v.w)
      : "l"(at), "r"(static_cast<uint32_t>(pred)));
  return v;
}

// 16 bytes from global `src` to shared `dst` by cp.async where `pred`, else
// 16 zeros (src-size 0: nothing read).
__device__ __forceinline__ void CopyChunkAsync(uint32_t dst, const uint8_t* src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(pred ? 16u : 0u)
               : "memory");
}

__device__ __forceinline__ void CopyAsyncCommit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

__device__ __forceinline__ void CopyAsyncWaitAll() {
  asm volatile("cp.async.wait_group 0;" ::: "memory");
}

__device__ __forceinline__ uint4 LoadShared16(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// Bytes [shift, shift + 16) of the 32 bytes lo:hi (lo first in memory), shift
// even in [0, 14]: word selects by 8 and 4 bytes, then a funnel shift by 2.
__device__ __forceinline__ uint4 Realign(const uint4& lo, const uint4& hi, uint32_t shift) {
  const uint32_t c[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const bool by8 = (shift & 8) != 0, by4 = (shift & 4) != 0;
  const uint32_t bits = (shift & 3) * 8;
  uint32_t t[6], u[5];
#pragma unroll
  for (int j = 0; j < 6; ++j) t[j] = by8 ? c[j + 2] : c[j];
#pragma unroll
  for (int j = 0; j < 5; ++j) u[j] = by4 ? t[j + 1] : t[j];
  return make_uint4(__funnelshift_r(u[0], u[1], bits), __funnelshift_r(u[1], u[2], bits),
                    __funnelshift_r(u[2], u[3], bits), __funnelshift_r(u[3], u[4], bits));
}

// Keeps the first `valid` 16-bit elements of the chunk (valid may be <= 0 or >= 8).
__device__ __forceinline__ uint4 KeepFirst(uint4 v, int valid) {
  if (valid >= 8) return v;
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (valid <= 2 * j) {
      w[j] = 0u;
    } else if (valid == 2 * j + 1) {
      w[j] &= 0xFFFFu;  // the element at the lower address
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ void StoreShared16(uint32_t addr, const uint4& v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ uint4 ShuffleDown1(const uint4& v) {
  return make_uint4(__shfl_down_sync(0xFFFFFFFFu, v.x, 1), __shfl_down_sync(0xFFFFFFFFu, v.y, 1),
                    __shfl_down_sync(0xFFFFFFFFu, v.z, 1), __shfl_down_sync(0xFFFFFFFFu, v.w, 1));
}


// ---------------------------------------------------------------- the kernel

template <bool kBf16>
__global__ void __launch_bounds__(kThreads, 1)
    WgmmaRaggedKernel(const __grid_constant__ CUtensorMap map_a, const uint16_t* __restrict__ b,
                      uint16_t* __restrict__ c, int m, int n, int k) {
  extern __shared__ uint8_t smem_raw[];
  // The 128B swizzle pattern repeats every 1024 bytes and wgmma descriptors
  // assume each stage starts on that boundary.
  const uint32_t base = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const uint32_t a_base = base;
  const uint32_t b_base = a_base + kStages * kABytes;
  const uint32_t full_base = b_base + kStages * kBBytes;  // A's bytes landed, B realigned
  const uint32_t empty_base = full_base + kStages * 8;    // consumers done reading
  // Two slots of 33rd chunks (16-byte aligned: the barriers above take 64 bytes).
  const uint32_t extra_base = empty_base + kStages * 8;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      // The expect_tx arrival for A's TMA bytes, and one per producer warp.
      BarrierInit(full_base + 8 * s, 1 + 4);
      BarrierInit(empty_base + 8 * s, kConsumers * 4);  // one arrival per consumer warp
    }
    // Make the initialized barriers visible to the async proxy (TMA).
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();

  const int tiles_m = (m + kBlockM - 1) / kBlockM;
  const int tiles_n = (n + kBlockN - 1) / kBlockN;
  const int tiles = tiles_m * tiles_n;
  const int k_blocks = (k + kBlockK - 1) / kBlockK;
  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x % 32;

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
    }
    const int warp = threadIdx.x / 32;
    const int r0 = warp * kRowsPerWarp;  // this warp's k-rows of each stage: r0 .. r0 + 15
    const auto* b_bytes = reinterpret_cast<const uint8_t*>(b);
    // The CTA's work is a flat sequence of k-blocks (k-block kb of tile
    // `tile`, tiles blockIdx.x, + gridDim.x, ...). Each thread keeps one
    // chunk of each of its warp's 16 rows of the next k-block in flight: the
    // load of row j of k-block i + 1 is issued as soon as row j of k-block i
    // is realigned, into the registers that held it, so the loads of a whole
    // stage travel while the producer waits for a free stage (and, as
    // written, while the previous stage is realigned: ptxas issues them after
    // the realign instead - run 3 of bench/results/wgmma-ragged-h200.md - so
    // one round trip per stage is exposed, where run 2 chained 16). Nothing
    // is loaded for a k-block past the CTA's last.
    uint4 v[kRowsPerWarp];
    const uint32_t two_n = 2u * static_cast<uint32_t>(n);  // bytes from a row to the next
    const uint32_t lane16 = 16u * static_cast<uint32_t>(lane);
    // Chunk `lane` of row j of `br`, or zeros (a row past K, or none at all).
    auto load_row = [&](const BlockRows& br, int j) {
      const uint8_t* start = br.first + static_cast<uint64_t>(j) * two_n;
      const uint32_t shift = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(start)) & 15u;
      return LoadChunkIf(start - shift + lane16, j < br.rows && lane16 < br.room + shift);
    };
    // The 33rd chunks of the same rows (lane i < 16: row i) by cp.async into
    // extra slot `slot`, as one commit group of every lane.
    auto copy_extras = [&](const BlockRows& br, int slot) {
      if (lane < kRowsPerWarp) {
        const uint8_t* start = br.first + static_cast<uint64_t>(lane) * two_n;
        const uint32_t shift = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(start)) & 15u;
        // Needed only where the row is misaligned and the chunk holds some of it.
        const bool need = lane < br.rows && shift != 0 && 16u * 32 < br.room + shift;
        CopyChunkAsync(extra_base + (slot * 4 + warp) * (kRowsPerWarp * 16) + lane16,
                       need ? start - shift + 16 * 32 : b_bytes, need);
      }
      CopyAsyncCommit();
    };
    auto n0_of = [&](int tile) {
      int m_tile, n_tile;
      WgmmaRaggedTileAt(tile, tiles_m, tiles_n, &m_tile, &n_tile);
      return n_tile * kBlockN;
    };

    int tile = blockIdx.x, kb = 0;
    int n0 = tile < tiles ? n0_of(tile) : 0;
    BlockRows cur = RowsOf(b_bytes, tile < tiles, r0, n, n0, k);
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) v[j] = load_row(cur, j);
    copy_extras(cur, 0);
    for (int it = 0; tile < tiles; ++it) {
      // The k-block after this one, whose loads go out while this one is realigned.
      int next_tile = tile, next_kb = kb + 1;
      if (next_kb == k_blocks) {
        next_kb = 0;
        next_tile += gridDim.x;
      }
      const bool next_live = next_tile < tiles;
      const int next_n0 = next_live ? n0_of(next_tile) : 0;
      const BlockRows nxt = RowsOf(b_bytes, next_live, next_kb * kBlockK + r0, n, next_n0, k);

      const int s = it % kStages;
      BarrierWait(empty_base + 8 * s, ((it / kStages) & 1) ^ 1);
      const uint32_t full = full_base + 8 * s;
      if (threadIdx.x == 0) {
        int m_tile, n_tile;
        WgmmaRaggedTileAt(tile, tiles_m, tiles_n, &m_tile, &n_tile);
        BarrierExpectTx(full, kABytes);  // rows past M come zero-filled, counted in full
        TmaLoad2d(a_base + s * kABytes, &map_a, full, kb * kBlockK, m_tile * kBlockM);
      }
      // This k-block's 33rd chunks have landed (the only group in flight);
      // __syncwarp makes them visible to lane 31 and orders the last k-block's
      // reads of the other slot before the copies into it below.
      CopyAsyncWaitAll();
      __syncwarp();
      const uint32_t extra_row = extra_base + ((it & 1) * 4 + warp) * (kRowsPerWarp * 16);
      copy_extras(nxt, (it + 1) & 1);
      // Chunk `lane` of k-row r goes to box lane / 8, 16-byte chunk lane % 8
      // of the row's 128 bytes, at (lane % 8) ^ (r % 8): the TMA 128B swizzle
      // (r0 is a multiple of 8, so r % 8 = j % 8).
      const uint32_t lane_at = b_base + s * kBBytes + (lane / 8) * kBBoxBytes + r0 * 128;
      // Masks keeping the columns of this lane's output chunk still inside C's
      // row: all ones but in the tile that passes N, where a chunk straddling
      // a row's end holds the next row's first elements. Rows past K need no
      // test: their chunks and 33rd chunks were never read (zeros).
      const uint4 keep = KeepFirst(make_uint4(~0u, ~0u, ~0u, ~0u), n - (n0 + 8 * lane));
      // Row j + 1's 33rd chunk is read before row j's shared store, which the
      // compiler may not move it past, so its latency overlaps row j's work.
      uint4 tail_next = LoadShared16(extra_row);
      const uint32_t cur_shift = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(cur.first)) & 15u;
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) {
        const uint4 tail = tail_next;
        if (j + 1 < kRowsPerWarp) tail_next = LoadShared16(extra_row + 16 * (j + 1));
        // The chunk after this lane's: its right neighbour's, or for lane 31
        // the row's 33rd chunk.
        uint4 next = ShuffleDown1(v[j]);
        if (lane == 31) next = tail;
        const uint32_t shift = (cur_shift + static_cast<uint32_t>(j) * two_n) & 15u;
        uint4 out = Realign(v[j], next, shift);
        out = make_uint4(out.x & keep.x, out.y & keep.y, out.z & keep.z, out.w & keep.w);
        StoreShared16(lane_at + j * 128 + ((static_cast<uint32_t>(lane % 8) ^ static_cast<uint32_t>(j % 8)) << 4),
                      out);
        v[j] = load_row(nxt, j);  // into the registers just freed
      }
      // Ordinary shared stores read next by wgmma (the async proxy): fence
      // in every writing thread, then one release arrival per warp.
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncwarp();
      if (lane == 0) BarrierArrive(full);
      tile = next_tile;
      kb = next_kb;
      n0 = next_n0;
      cur = nxt;
    }
    CopyAsyncWaitAll();  // the last (empty) group: nothing left in flight at exit
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
    const int consumer = warpgroup - 1;
    const int warp = (threadIdx.x / 32) % 4;
    float acc[kBlockN / 2];
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) acc[i] = 0.0f;
    const bool n_even = n % 2 == 0;

    int it = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int m_tile, n_tile;
      WgmmaRaggedTileAt(tile, tiles_m, tiles_n, &m_tile, &n_tile);
      for (int kb = 0; kb < k_blocks; ++kb, ++it) {
        const int s = it % kStages;
        BarrierWait(full_base + 8 * s, (it / kStages) & 1);
        const uint32_t a_stage = a_base + s * kABytes + consumer * 64 * 128;
        const uint32_t b_stage = b_base + s * kBBytes;
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kBlockK / 16; ++kk) {
          // k16 step: +32 bytes along A's swizzled 128-byte rows; +16 k-rows
          // (2048 bytes) down B's boxes, which lie kBBoxBytes apart along N.
          const uint64_t desc_a = SmemDesc(a_stage + 32 * kk, 16, 1024);
          const uint64_t desc_b = SmemDesc(b_stage + 2048 * kk, kBBoxBytes, 1024);
          Mma64x256<kBf16>(acc, desc_a, desc_b, (kb != 0 || kk != 0) ? 1u : 0u);
        }
        WgmmaCommit();
        if (kb > 0) {
          // Keep this k-block's wgmma in flight; the previous one has finished
          // reading its stage, so hand that stage back to the producer.
          WgmmaWait<1>();
          if (lane == 0) BarrierArrive(empty_base + 8 * ((it - 1) % kStages));
        }
      }
      WgmmaWait<0>();
      FenceAccumulators(acc);
      if (lane == 0) BarrierArrive(empty_base + 8 * ((it - 1) % kStages));

      // Straight from the accumulators: the m64n256 layout gives this thread
      // rows r and r + 8 and, in each 8-column chunk j, columns 2 (lane % 4)
      // and + 1. C's rows are 2N bytes apart: a column pair is one aligned
      // 4-byte word when N is even, two 2-byte stores when N is odd.
      const int row = m_tile * kBlockM + consumer * 64 + warp * 16 + lane / 4;
      uint16_t* c_row = c + static_cast<int64_t>(row) * n;
      uint16_t* c_row8 = c_row + static_cast<int64_t>(8) * n;
      const int col0 = n_tile * kBlockN + 2 * (lane % 4);
      if (n_even) {
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) {
          const int col = col0 + 8 * j;
          if (col >= n) continue;  // then col + 1 < n too: col is even, n even
          if (row < m) *reinterpret_cast<uint32_t*>(c_row + col) = PackPair<kBf16>(acc[4 * j], acc[4 * j + 1]);
          if (row + 8 < m) {
            *reinterpret_cast<uint32_t*>(c_row8 + col) = PackPair<kBf16>(acc[4 * j + 2], acc[4 * j + 3]);
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) {
          const int col = col0 + 8 * j;
          if (col >= n) continue;
          const bool second = col + 1 < n;
          if (row < m) {
            const uint32_t p = PackPair<kBf16>(acc[4 * j], acc[4 * j + 1]);
            c_row[col] = static_cast<uint16_t>(p);
            if (second) c_row[col + 1] = static_cast<uint16_t>(p >> 16);
          }
          if (row + 8 < m) {
            const uint32_t p = PackPair<kBf16>(acc[4 * j + 2], acc[4 * j + 3]);
            c_row8[col] = static_cast<uint16_t>(p);
            if (second) c_row8[col + 1] = static_cast<uint16_t>(p >> 16);
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------- host side

// Raises the kernel's dynamic shared-memory limit once per device.
template <bool kBf16>
cudaError_t EnsureSmemLimit() {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < kMaxDevices && done[device].load(std::memory_order_acquire)) return cudaSuccess;
  err = cudaFuncSetAttribute(WgmmaRaggedKernel<kBf16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kSmemBytes);
  if (err == cudaSuccess && device < kMaxDevices) done[device].store(true, std::memory_order_release);
  return err;
}

template <bool kBf16>
cudaError_t LaunchDType(const LaunchArgs& args, const WgmmaRaggedPlan& plan, cudaStream_t stream) {
  cudaError_t err = EnsureSmemLimit<kBf16>();
  if (err != cudaSuccess) return err;
  CUtensorMap map_a;
  err = hopper::EncodeTensorMap16(&map_a, kBf16, args.a, args.k, args.m, kBlockK, kBlockM);
  if (err != cudaSuccess) return err;
  WgmmaRaggedKernel<kBf16><<<plan.grid_x, kThreads, kSmemBytes, stream>>>(
      map_a, static_cast<const uint16_t*>(args.b), static_cast<uint16_t*>(args.c),
      static_cast<int>(args.m), static_cast<int>(args.n), static_cast<int>(args.k));
  return cudaGetLastError();
}

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

cudaError_t LaunchPlanned(const LaunchArgs& args, cudaStream_t stream) {
  return LaunchWgmmaRagged(args, stream);
}

}  // namespace

WgmmaRaggedPlan MakeWgmmaRaggedPlan(int64_t m, int64_t n, int sm_count) {
  WgmmaRaggedPlan plan;
  plan.tiles_m = static_cast<int>(CeilDiv(m, kBlockM));
  plan.tiles_n = static_cast<int>(CeilDiv(n, kBlockN));
  const int sms = sm_count > 0 ? sm_count : 1;
  plan.grid_x = plan.tiles() < sms ? plan.tiles() : sms;
  return plan;
}

const char* WgmmaRaggedUnsupportedReason(const LaunchArgs& args) {
  if (!DimsInRange(args)) return "M, N and K must be in [1, 2^31)";
  if (args.dtype != DType::kF16 && args.dtype != DType::kBF16) return "dtype must be f16 or bf16";
  if (args.n % 8 == 0) return "N % 8 == 0 goes to the TMA families (wgmma)";
  if (args.k % 8 != 0) return "K must be a multiple of 8 (TMA needs 16-byte row strides for A)";
  // Tile indices are 32-bit in the kernel.
  if (CeilDiv(args.m, kBlockM) * CeilDiv(args.n, kBlockN) >= kMaxLaunchDim) {
    return "more than 2^31 output tiles";
  }
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) return "null operand";
  if (!Aligned(args.a, 16)) return "A must be 16-byte aligned for TMA";
  if (!Aligned(args.b, 16)) return "B must be 16-byte aligned (read in aligned 16-byte chunks)";
  if (!Aligned(args.c, args.n % 2 == 0 ? 4 : 2)) {
    return "C must be 4-byte aligned (2-byte at odd N): column pairs are stored as words";
  }
  return nullptr;
}

cudaError_t LaunchWgmmaRagged(const LaunchArgs& args, cudaStream_t stream) {
  if (WgmmaRaggedUnsupportedReason(args) != nullptr) return cudaErrorInvalidValue;
  const WgmmaRaggedPlan plan = MakeWgmmaRaggedPlan(args.m, args.n, args.sm_count);
  return args.dtype == DType::kBF16 ? LaunchDType<true>(args, plan, stream)
                                    : LaunchDType<false>(args, plan, stream);
}

const Launcher kWgmmaRagged = {"LaunchWgmmaRagged", LaunchPlanned, nullptr,
                               WgmmaRaggedUnsupportedReason};

}  // namespace arbiter::kernels
