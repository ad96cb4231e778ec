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
constexpr int kSmemBytes = kStages * (kABytes + kBBytes) + 2 * kStages * 8 + 1024;
static_assert(kSmemBytes <= 227 * 1024, "exceeds the sm_90 shared-memory limit per block");
// A 256-column row of a B tile is 32 16-byte chunks: one per lane.
static_assert(kBlockN == 256, "the producer maps one lane to each 16-byte chunk of a B row");
// Each producer warp realigns 16 of the 64 k-rows of a stage, kBatch rows'
// loads in flight at once (4 registers each): more bytes in flight per SM
// than 4-byte copies could keep, within the producer's register budget.
constexpr int kRowsPerWarp = kBlockK / 4;
constexpr int kBatch = 8;
// Registers, moved from the producer to the consumers by setmaxnreg: the
// kernel starts with 168 per thread (65536 / 384, rounded down to 8), and
// 128 * 72 + 256 * 216 = 64512 = 384 * 168. The consumers hold 128 f32
// accumulators each (m64n256).
constexpr int kProducerRegs = 72;
constexpr int kConsumerRegs = 216;
static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= 168 * kThreads);

// ---------------------------------------------------------------- device helpers

#define RAGGED_ACC8(i)                                                                        \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])

#define RAGGED_REGS_128                                                                       \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                   \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "          \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "          \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "          \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "          \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "          \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "     \
  "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, " \
  "%126, %127}"

// D(64 x 256, f32) += A(64 x 16, K-major) * B(16 x 256, MN-major: trans-b = 1).
// scale_d = 0 overwrites D instead (the first k step of a tile).
template <bool kBf16>
__device__ __forceinline__ void Mma64x256(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                          uint32_t scale_d) {
  if constexpr (kBf16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " RAGGED_REGS_128
        ", %128, %129, p, 1, 1, 0, 1;\n}\n"
        : RAGGED_ACC8(0), RAGGED_ACC8(8), RAGGED_ACC8(16), RAGGED_ACC8(24), RAGGED_ACC8(32),
          RAGGED_ACC8(40), RAGGED_ACC8(48), RAGGED_ACC8(56), RAGGED_ACC8(64), RAGGED_ACC8(72),
          RAGGED_ACC8(80), RAGGED_ACC8(88), RAGGED_ACC8(96), RAGGED_ACC8(104), RAGGED_ACC8(112),
          RAGGED_ACC8(120)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " RAGGED_REGS_128
        ", %128, %129, p, 1, 1, 0, 1;\n}\n"
        : RAGGED_ACC8(0), RAGGED_ACC8(8), RAGGED_ACC8(16), RAGGED_ACC8(24), RAGGED_ACC8(32),
          RAGGED_ACC8(40), RAGGED_ACC8(48), RAGGED_ACC8(56), RAGGED_ACC8(64), RAGGED_ACC8(72),
          RAGGED_ACC8(80), RAGGED_ACC8(88), RAGGED_ACC8(96), RAGGED_ACC8(104), RAGGED_ACC8(112),
          RAGGED_ACC8(120)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
}

// Two f32 rounded to the dtype, packed low element first.
template <bool kBf16>
__device__ __forceinline__ uint32_t PackPair(float x, float y) {
  if constexpr (kBf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// The 16-byte chunk of B at `at` (16-byte aligned), or zeros where it starts
// at or past `row_end` (nothing of this row in it). No load passes B's end:
// K % 8 == 0 makes B's size 2KN a multiple of 16, so a chunk that starts
// inside B ends inside it. B is read by the M tiles in flight from L2;
// nothing is kept in L1.
__device__ __forceinline__ uint4 LoadChunk(const uint8_t* at, const uint8_t* row_end) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (at < row_end) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(at));
  }
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

__device__ __forceinline__ uint4 ShuffleFrom(const uint4& v, int lane) {
  return make_uint4(__shfl_sync(0xFFFFFFFFu, v.x, lane), __shfl_sync(0xFFFFFFFFu, v.y, lane),
                    __shfl_sync(0xFFFFFFFFu, v.z, lane), __shfl_sync(0xFFFFFFFFu, v.w, lane));
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
    const int warp = threadIdx.x / 32;  // 0..3: k-rows 16 * warp .. + 15 of each stage
    const auto* b_bytes = reinterpret_cast<const uint8_t*>(b);
    int it = 0;  // k-blocks issued by this CTA, across tiles: stage = it % kStages
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int m_tile, n_tile;
      WgmmaRaggedTileAt(tile, tiles_m, tiles_n, &m_tile, &n_tile);
      const int n0 = n_tile * kBlockN;
      // Columns of this lane's output chunk still inside C's row (<= 0: none).
      const int valid = n - (n0 + 8 * lane);
      for (int kb = 0; kb < k_blocks; ++kb, ++it) {
        const int s = it % kStages;
        BarrierWait(empty_base + 8 * s, ((it / kStages) & 1) ^ 1);
        const uint32_t full = full_base + 8 * s;
        if (threadIdx.x == 0) {
          BarrierExpectTx(full, kABytes);  // rows past M come zero-filled, counted in full
          TmaLoad2d(a_base + s * kABytes, &map_a, full, kb * kBlockK, m_tile * kBlockM);
        }
        const uint32_t b_stage = b_base + s * kBBytes;
#pragma unroll 1
        for (int r0 = warp * kRowsPerWarp; r0 < (warp + 1) * kRowsPerWarp; r0 += kBatch) {
          // Loads of kBatch rows first, all in flight together: lane i reads
          // chunk i of each row's aligned-down span into its own registers.
          uint4 v[kBatch];
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            const int row = kb * kBlockK + r0 + j;
            v[j] = make_uint4(0u, 0u, 0u, 0u);
            if (row < k) {  // uniform over the warp
              const int64_t first = static_cast<int64_t>(row) * n;  // element (row, 0)
              const uint8_t* span = reinterpret_cast<const uint8_t*>(
                  reinterpret_cast<uintptr_t>(b_bytes + 2 * (first + n0)) & ~uintptr_t{15});
              v[j] = LoadChunk(span + 16 * lane, b_bytes + 2 * (first + n));
            }
          }
          // The span's 33rd chunk of row r0 + j, needed only where the row is
          // misaligned, by lane j: one load for the batch. (Loading it in the
          // loop above, `if (lane == j)`, made 8 predicated loads write the
          // same registers, each waiting for the last to land: run 2 of
          // bench/results/wgmma-ragged-h200.md.)
          uint4 extra = make_uint4(0u, 0u, 0u, 0u);
          {
            const int row = kb * kBlockK + r0 + lane;
            if (lane < kBatch && row < k) {
              const int64_t first = static_cast<int64_t>(row) * n;
              const uint8_t* start = b_bytes + 2 * (first + n0);
              const uint8_t* span = reinterpret_cast<const uint8_t*>(
                  reinterpret_cast<uintptr_t>(start) & ~uintptr_t{15});
              if (span != start) extra = LoadChunk(span + 16 * 32, b_bytes + 2 * (first + n));
            }
          }
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            const int r = r0 + j;
            const int row = kb * kBlockK + r;
            // The chunk after this lane's: its right neighbour's, or for lane
            // 31 the extra chunk lane j loaded.
            uint4 next = ShuffleDown1(v[j]);
            const uint4 tail = ShuffleFrom(extra, j);
            if (lane == 31) next = tail;
            // Misalignment of (row, n0) in bytes: 2 (row N + n0) mod 16, the
            // same for every chunk of the row (B is 16-byte aligned).
            const uint32_t shift =
                2u * ((static_cast<uint32_t>(row) * static_cast<uint32_t>(n) + static_cast<uint32_t>(n0)) & 7u);
            uint4 out = KeepFirst(Realign(v[j], next, shift), valid);
            if (row >= k) out = make_uint4(0u, 0u, 0u, 0u);  // rows past K add nothing
            // Chunk `lane` of the row: box lane / 8, 16-byte chunk lane % 8 of
            // its 128-byte row, at (lane % 8) ^ (r % 8): the TMA 128B swizzle.
            const uint32_t at = b_stage + (lane / 8) * kBBoxBytes + r * 128 +
                                ((static_cast<uint32_t>(lane % 8) ^ static_cast<uint32_t>(r % 8)) << 4);
            StoreShared16(at, out);
          }
        }
        // Ordinary shared stores read next by wgmma (the async proxy): fence
        // in every writing thread, then one release arrival per warp.
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncwarp();
        if (lane == 0) BarrierArrive(full);
      }
    }
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
