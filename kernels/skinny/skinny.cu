// skinny: C[M, N] = A[M, K] B[K, N] for M <= 32, streaming B once.
//
// The tensor cores compute C^T = B^T A^T: mma.sync m16n8k16 with the weight B
// as the 16 x 16 "A" operand (16 columns of B by 16 k) and 8 rows of A (tokens)
// as the 16 x 8 "B" operand, so one warp instruction serves 8 tokens and every
// B element is loaded once. A thread loads V consecutive columns of B (one
// 16-, 8- or 4-byte load) from each of four consecutive k rows and byte-permutes
// them into V/2 fragments: mma k slots {2c, 2c+1, 2c+8, 2c+9} of lane (g, c)
// hold k rows 4c .. 4c+3 of the 16-row step (the same permutation is applied to
// A, whose four k values per lane are then one 8-byte load), and mma rows g and
// g+8 of fragment f hold columns g*V + 2f and + 1. So B goes from DRAM to the
// tensor cores with no re-layout: each lane copies its 4 x 16 bytes into
// shared-memory slots of its own and reads them back; a warp's copy
// instruction covers four k rows x 8V columns (four 128-byte lines at V = 8).
//
// Launch geometry: grid.x walks N in strips of 8V columns (one strip per CTA),
// grid.y walks the K splits; no axis walks M (every CTA carries all M rows, in
// TG groups of 8 tokens). A CTA is 4 warps; warp w of CTA (x, y) owns K slice
// y * 4 + w = rows [slice * k_chunk, (slice + 1) * k_chunk). Each warp streams
// its slice through a ring of k16 steps in shared memory filled by cp.async
// (RingDepth: 3 to 8 steps, 16-byte copies that bypass L1) and computes one
// step while the others are in flight; no register holds data in flight.
// Members by M: TG = 1, 2 or 4 groups of 8 tokens (M <= 8, 16, 32); V = 8
// columns per thread up to 16 rows, 4 beyond (accumulators: 2 V TG).
// The split plan (MakeSkinnyPlan) depends on N, K and the SM count only.
//
// Reduction, in a fixed order everywhere (no atomics): the 4 warps of a CTA
// through shared memory, ((w0 + w1) + w2) + w3; then the splits of a strip,
// s0 + s1 + ... in split order: with <= 8 splits they are the CTAs of one
// thread-block cluster and each CTA adds a share of the strip's elements over
// distributed shared memory; with more (N too narrow to fill the SMs) each
// CTA writes an f32 slab [y][M][N] to workspace and LaunchSplitReduce
// (kernels/common/split_reduce.h) adds the slabs in split order. Bitwise
// run-to-run deterministic. The K partition
// and the order do not depend on M, nor on the member (TG, V) M selects, and
// a token row's mma chain is the same in every member: batch invariant.
//
// Ragged shapes, with no copies: columns past N and k rows past the slice or K
// load as zeros; V follows N's alignment (16-byte loads when N % 8 == 0, 8 or
// 4 bytes when N % 4 or N % 2 == 0, element loads for odd N), and A is read 8
// bytes at a time when K % 4 == 0, element by element otherwise. Indexing is
// 64-bit: N up to 2^31 (vocabulary projections of 256000 columns and more).

#include "kernels/skinny/skinny.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <cooperative_groups.h>

#include "kernels/common/mma_sync.cuh"
#include "kernels/common/split_reduce.h"
#include "kernels/common/storage.cuh"

namespace arbiter::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 4;  // warps per CTA, one K slice each
constexpr int kThreads = 32 * kWarps;
// Each warp streams its slice through a ring of RingDepth k16 steps in shared
// memory, filled by cp.async: RingDepth - 1 steps (each 4 rows of B and A's 4
// k values per token group, for every lane) are in flight while one is
// computed, with no registers held for them. A step takes 32 * (8V + 8TG)
// bytes; the ring takes up to 48 KB of a CTA (3 CTAs and their reduction
// buffers fit an SM).
template <int TG, int V>
__host__ __device__ constexpr int RingDepth() {
  constexpr int kStepBytes = 32 * (8 * V + 8 * TG);
  constexpr int kDepth = 48 * 1024 / (4 * kStepBytes);
  return kDepth < 3 ? 3 : kDepth > 8 ? 8 : kDepth;
}
template <int TG, int V>
__host__ __device__ constexpr int RingBytes() {
  return 4 * RingDepth<TG, V>() * 32 * (8 * V + 8 * TG);
}
// CTAs per SM the registers allow (up to 170 registers a thread).
template <int TG>
__host__ __device__ constexpr int CtasPerSmFor() { return 3; }
constexpr int kChunkAlign = 32;       // K slices start at multiples of 32 rows (whole batches)
constexpr int kNominalStrip = 64;     // columns per CTA the plan assumes (V = 8)
constexpr int kMaxClusterSplits = 8;  // portable cluster size
constexpr int kCtasPerSm = 3;         // CTAs per SM the plan fills (the small-M members' occupancy)
constexpr int kMinRowsPerWarp = 64;   // a slice shorter than this is mostly ramp-up
constexpr int kMaxSplits = 4096;

struct Params {
  const uint16_t* a;
  const uint16_t* b;
  uint16_t* c;
  float* partials;  // workspace slabs, or null
  int64_t m, n, k;
  int64_t k_chunk;
  bool a_vec;  // A rows readable 8 bytes at a time (K % 4 == 0, A 8-byte aligned)
};

// ---- device helpers --------------------------------------------------------------

// B is read once: its copies bypass L1 and carry an L2 evict-first policy,
// so that the stream of B replaces its own lines in L2 rather than what other
// work left there (dirty lines would otherwise be written back to DRAM under
// the stream, and data the next kernel reads would be gone).
__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Asynchronous global->shared copies of 16, 8 or 4 bytes; src_bytes 0 writes
// zeros and reads nothing (src must still be a valid address).
__device__ __forceinline__ void CopyB16(uint32_t dst, const void* src, bool ok, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(dst),
               "l"(src), "r"(ok ? 16 : 0), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void CopyB8(uint32_t dst, const void* src, bool ok, uint64_t policy) {
  asm volatile("cp.async.ca.shared.global.L2::cache_hint [%0], [%1], 8, %2, %3;" ::"r"(dst),
               "l"(src), "r"(ok ? 8 : 0), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void CopyB4(uint32_t dst, const void* src, bool ok, uint64_t policy) {
  asm volatile("cp.async.ca.shared.global.L2::cache_hint [%0], [%1], 4, %2, %3;" ::"r"(dst),
               "l"(src), "r"(ok ? 4 : 0), "l"(policy)
               : "memory");
}
// A through L1 (every strip's CTA re-reads it).
__device__ __forceinline__ void CopyA8(uint32_t dst, const void* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src),
               "r"(ok ? 8 : 0)
               : "memory");
}
__device__ __forceinline__ void CopyCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void CopyWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// Element loads for what cp.async cannot copy (2-byte granularity: odd N, or
// K % 4 != 0 for A): zero where `ok` is false, no access there.
__device__ __forceinline__ uint32_t LoadU16(const uint16_t* p, bool ok) {
  uint32_t v;
  asm volatile(
      "{\n.reg .pred p;\n.reg .b16 h;\nsetp.ne.b32 p, %2, 0;\nmov.b16 h, 0;\n"
      "@p ld.global.nc.b16 h, [%1];\ncvt.u32.u16 %0, h;\n}\n"
      : "=r"(v)
      : "l"(p), "r"(static_cast<int>(ok)));
  return v;
}

__device__ __forceinline__ void StoreShared1(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void StoreShared2(uint32_t addr, uint32_t x, uint32_t y) {
  asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(addr), "r"(x), "r"(y) : "memory");
}
__device__ __forceinline__ void LoadShared(uint32_t addr, uint32_t (&v)[4]) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void LoadShared(uint32_t addr, uint32_t (&v)[2]) {
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(v[0]), "=r"(v[1]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void LoadShared(uint32_t addr, uint32_t (&v)[1]) {
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v[0]) : "r"(addr) : "memory");
}

// ---- the kernel ------------------------------------------------------------------

// kMode: 0 = one split, write C; 1 = splits in a cluster, added over DSMEM;
// 2 = splits to workspace slabs.
template <bool kBf16, int TG, int V, bool kElemB, int kMode>
__global__ void __launch_bounds__(kThreads, CtasPerSmFor<TG>()) SkinnyKernel(const Params p) {
  static_assert(V == 8 || V == 4 || V == 2);
  static_assert(!kElemB || V == 2);
  constexpr int kCols = 8 * V;           // columns per CTA strip
  constexpr int kStride = kCols + 4;     // shared row stride (floats), 16-byte aligned
  constexpr int kTokens = 8 * TG;
  constexpr int kDepth = RingDepth<TG, V>();
  // One step of one warp in the ring: B as [row s][lane] entries of 2V bytes,
  // then A as [token group][lane] entries of 8 bytes. A lane reads back only
  // what it copied itself, so no barrier is needed between copy and use.
  constexpr int kBEntry = 2 * V;
  constexpr int kStepBytes = 32 * (4 * kBEntry + 8 * TG);
  __shared__ __align__(16) float red[kWarps][kTokens][kStride];
  extern __shared__ __align__(16) uint8_t ring_raw[];

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;  // mma group: column block and token within a group of 8
  const int cq = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kCols;
  const int64_t col = n0 + g * V;
  const int64_t slice = static_cast<int64_t>(blockIdx.y) * kWarps + warp;
  const int64_t kbeg = slice * p.k_chunk;
  const int64_t kend = min(p.k, kbeg + p.k_chunk);
  // Token groups wholly past M are skipped (uniform across the CTA).
  const int live_groups = static_cast<int>(min(static_cast<int64_t>(TG), (p.m + 7) / 8));

  float acc[TG][V / 2][4];
#pragma unroll
  for (int t = 0; t < TG; ++t) {
#pragma unroll
    for (int f = 0; f < V / 2; ++f) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][f][i] = 0.f;
    }
  }

  if (kbeg < kend) {
    const uint64_t policy = EvictFirstPolicy();
    const bool col_ok0 = col < p.n;
    const bool col_ok1 = col + 1 < p.n;  // element path only
    // Row 4c of this warp's first step, at this thread's columns.
    const uint16_t* b_ptr = p.b + (kbeg + 4 * cq) * p.n + (col_ok0 ? col : 0);
    // Token g of group 0 at k = kbeg + 4c; group t adds 8t rows of A.
    const int64_t a_row = min(static_cast<int64_t>(g), p.m - 1);
    const uint16_t* a_ptr = p.a + a_row * p.k + kbeg + 4 * cq;
    const uint32_t ring = SmemAddr(ring_raw) + warp * kDepth * kStepBytes;
    auto b_slot = [&](int slot, int row) {
      return ring + slot * kStepBytes + (row * 32 + lane) * kBEntry;
    };
    auto a_slot = [&](int slot, int t) {
      return ring + slot * kStepBytes + 32 * 4 * kBEntry + (t * 32 + lane) * 8;
    };
    const int steps = static_cast<int>((kend - kbeg + 15) / 16);

    // Step i: B rows kbeg + 16i + 4c + s (valid below kend) at this thread's
    // columns, and A's 4 k values from kbeg + 16i + 4c for each token group.
    auto issue = [&](int i) {
      const int slot = i % kDepth;
      const int64_t rows_left = kend - (kbeg + 16 * i + 4 * cq);
      const uint16_t* bp = b_ptr + static_cast<int64_t>(16 * i) * p.n;
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const bool ok = col_ok0 && s < rows_left;
        const uint16_t* q = ok ? bp + s * p.n : p.b;
        if constexpr (V == 8) {
          CopyB16(b_slot(slot, s), q, ok, policy);
        } else if constexpr (V == 4) {
          CopyB8(b_slot(slot, s), q, ok, policy);
        } else if constexpr (!kElemB) {
          CopyB4(b_slot(slot, s), q, ok, policy);
        } else {
          // Odd N: 2-byte loads through registers (cp.async copies 4 bytes at least).
          const uint32_t lo = LoadU16(q, ok);
          const uint32_t hi = LoadU16(q + 1, ok && col_ok1);
          StoreShared1(b_slot(slot, s), lo | (hi << 16));
        }
      }
#pragma unroll
      for (int t = 0; t < TG; ++t) {
        if (t >= live_groups) continue;  // never read: its mma is skipped
        const bool token_ok = 8 * t + g < p.m;
        const uint16_t* q = a_ptr + static_cast<int64_t>(16 * i) + static_cast<int64_t>(8 * t) * p.k;
        if (p.a_vec) {
          // K % 4 == 0 and slices start at multiples of 32: the 4 values are all
          // inside [kbeg, kend) or all outside.
          const bool ok = token_ok && 0 < rows_left;
          CopyA8(a_slot(slot, t), ok ? q : p.a, ok);
        } else {
          uint32_t e[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) e[j] = LoadU16(q + j, token_ok && j < rows_left);
          StoreShared2(a_slot(slot, t), e[0] | (e[1] << 16), e[2] | (e[3] << 16));
        }
      }
    };

    auto compute = [&](int i) {
      const int slot = i % kDepth;
      uint32_t rows[4][V / 2];
#pragma unroll
      for (int s = 0; s < 4; ++s) LoadShared(b_slot(slot, s), rows[s]);
#pragma unroll
      for (int f = 0; f < V / 2; ++f) {
        // Rows s = 0, 1 fill k slots 2c, 2c+1; rows 2, 3 fill 2c+8, 2c+9. The
        // low halves are column g*V + 2f (mma row g), the high halves the next
        // column (mma row g + 8).
        const uint32_t frag[4] = {__byte_perm(rows[0][f], rows[1][f], 0x5410),
                                  __byte_perm(rows[0][f], rows[1][f], 0x7632),
                                  __byte_perm(rows[2][f], rows[3][f], 0x5410),
                                  __byte_perm(rows[2][f], rows[3][f], 0x7632)};
#pragma unroll
        for (int t = 0; t < TG; ++t) {
          if (t < live_groups) {
            uint32_t a_frag[2];
            LoadShared(a_slot(slot, t), a_frag);
            Mma16816<kBf16>(acc[t][f], frag, a_frag);
          }
        }
      }
    };

    // kDepth - 1 steps in flight ahead of the one computed; one commit group
    // per step (empty ones too, so that the group count stays exact).
#pragma unroll
    for (int i = 0; i < kDepth - 1; ++i) {
      if (i < steps) issue(i);
      CopyCommit();
    }
    for (int i = 0; i < steps; ++i) {
      CopyWait<kDepth - 2>();  // this lane's copies of step i have landed
      compute(i);
      // Refill the slot of step i - 1, whose data this lane has already read.
      if (i + kDepth - 1 < steps) issue(i + kDepth - 1);
      CopyCommit();
    }
    CopyWait<0>();
  }

  // D fragment of (token group t, fragment f): d0, d1 = tokens 2c, 2c+1 at
  // column g*V + 2f; d2, d3 = the same tokens at the next column.
#pragma unroll
  for (int t = 0; t < TG; ++t) {
#pragma unroll
    for (int f = 0; f < V / 2; ++f) {
      const int token = 8 * t + 2 * cq;
      const int j = g * V + 2 * f;
      *reinterpret_cast<float2*>(&red[warp][token][j]) = make_float2(acc[t][f][0], acc[t][f][2]);
      *reinterpret_cast<float2*>(&red[warp][token + 1][j]) =
          make_float2(acc[t][f][1], acc[t][f][3]);
    }
  }
  __syncthreads();

  // The CTA's partial: the warps' slices in warp order, into red[0].
  const int tokens = static_cast<int>(min(static_cast<int64_t>(kTokens), p.m));
  const int count = tokens * kCols;
  for (int e = threadIdx.x; e < count; e += kThreads) {
    const int t = e / kCols, j = e % kCols;
    float s = red[0][t][j];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) s += red[w][t][j];
    if constexpr (kMode == 0) {
      if (n0 + j < p.n) p.c[t * p.n + n0 + j] = ToStorage<kBf16>(s);
    } else if constexpr (kMode == 1) {
      red[0][t][j] = s;  // read back by the cluster below (same thread, same element)
    } else {
      if (n0 + j < p.n) p.partials[(blockIdx.y * p.m + t) * p.n + n0 + j] = s;
    }
  }

  if constexpr (kMode == 1) {
    // The splits of this strip are the cluster's CTAs, rank = blockIdx.y (the
    // cluster spans grid.y). Rank r adds its share of the strip's elements
    // over all ranks' red[0] in rank order, then the cluster waits so no CTA
    // leaves while its shared memory is still being read.
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    const int splits = static_cast<int>(cluster.num_blocks());
    const int rank = static_cast<int>(cluster.block_rank());
    const int per = (count + splits - 1) / splits;
    const int hi = min(count, (rank + 1) * per);
    for (int e = rank * per + threadIdx.x; e < hi; e += kThreads) {
      const int t = e / kCols, j = e % kCols;
      float* local = &red[0][t][j];
      float s = *cluster.map_shared_rank(local, 0);
      for (int q = 1; q < splits; ++q) s += *cluster.map_shared_rank(local, q);
      if (n0 + j < p.n) p.c[t * p.n + n0 + j] = ToStorage<kBf16>(s);
    }
    cluster.sync();
  }
}

// ---- host side -------------------------------------------------------------------

// Raises one instantiation's dynamic shared-memory limit (its ring) once per
// device: templated on the instantiation, since all of them share one type.
template <bool kBf16, int TG, int V, bool kElemB, int kMode>
cudaError_t EnsureRingLimit() {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < kMaxDevices && done[device].load(std::memory_order_acquire)) return cudaSuccess;
  err = cudaFuncSetAttribute(SkinnyKernel<kBf16, TG, V, kElemB, kMode>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, RingBytes<TG, V>());
  if (err == cudaSuccess && device < kMaxDevices) done[device].store(true, std::memory_order_release);
  return err;
}

template <bool kBf16, int TG, int V, bool kElemB>
cudaError_t LaunchMember(const LaunchArgs& args, const SkinnyPlan& plan, const Params& p,
                         cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(CeilDiv(args.n, 8 * V)),
                  static_cast<unsigned>(plan.splits));
  constexpr int kRing = RingBytes<TG, V>();
  if (plan.workspace) {
    auto* kernel = &SkinnyKernel<kBf16, TG, V, kElemB, 2>;
    const cudaError_t err = EnsureRingLimit<kBf16, TG, V, kElemB, 2>();
    if (err != cudaSuccess) return err;
    kernel<<<grid, kThreads, kRing, stream>>>(p);
  } else if (plan.splits == 1) {
    auto* kernel = &SkinnyKernel<kBf16, TG, V, kElemB, 0>;
    const cudaError_t err = EnsureRingLimit<kBf16, TG, V, kElemB, 0>();
    if (err != cudaSuccess) return err;
    kernel<<<grid, kThreads, kRing, stream>>>(p);
  } else {
    auto* kernel = &SkinnyKernel<kBf16, TG, V, kElemB, 1>;
    const cudaError_t err = EnsureRingLimit<kBf16, TG, V, kElemB, 1>();
    if (err != cudaSuccess) return err;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = kRing;
    config.stream = stream;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = 1;
    attribute[0].val.clusterDim.y = static_cast<unsigned>(plan.splits);
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
    const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, p);
    if (launched != cudaSuccess) return launched;
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || !plan.workspace) return err;
  // The slabs in split order (kernels/common/split_reduce.h).
  return LaunchSplitReduce(args.dtype, p.partials, args.m * args.n, plan.splits, args.c, stream);
}

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Widest B load N's alignment allows (8, 4, 2 columns; 1 = element loads).
int AlignedWidth(const LaunchArgs& args) {
  if (args.n % 8 == 0 && Aligned(args.b, 16)) return 8;
  if (args.n % 4 == 0 && Aligned(args.b, 8)) return 4;
  if (args.n % 2 == 0 && Aligned(args.b, 4)) return 2;
  return 1;
}

// Members by token groups of 8 (TG) and load width (V). Wider loads carry more
// accumulators (2 * V * TG registers), so V narrows as M grows.
template <bool kBf16, int TG>
cudaError_t LaunchGroups(const LaunchArgs& args, const SkinnyPlan& plan, const Params& p,
                         cudaStream_t stream) {
  constexpr int kMaxV = TG <= 2 ? 8 : 4;
  const int width = std::min(AlignedWidth(args), kMaxV);
  if constexpr (kMaxV >= 8) {
    if (width == 8) return LaunchMember<kBf16, TG, 8, false>(args, plan, p, stream);
  }
  if constexpr (kMaxV >= 4) {
    if (width == 4) return LaunchMember<kBf16, TG, 4, false>(args, plan, p, stream);
  }
  if (width == 2) return LaunchMember<kBf16, TG, 2, false>(args, plan, p, stream);
  return LaunchMember<kBf16, TG, 2, true>(args, plan, p, stream);
}

template <bool kBf16>
cudaError_t LaunchDtype(const LaunchArgs& args, const SkinnyPlan& plan, const Params& p,
                        cudaStream_t stream) {
  if (args.m <= 8) return LaunchGroups<kBf16, 1>(args, plan, p, stream);
  if (args.m <= 16) return LaunchGroups<kBf16, 2>(args, plan, p, stream);
  return LaunchGroups<kBf16, 4>(args, plan, p, stream);
}

}  // namespace

// Splits: enough CTAs (4 warps each, at the nominal 64-column strip) to give
// every SM kCtasPerSm of them, in as few waves as fill well - a bandwidth-bound
// kernel loses most in a last wave that leaves SMs without loads in flight.
// Each warp keeps at least kMinRowsPerWarp rows of K.
SkinnyPlan MakeSkinnyPlan(int64_t n, int64_t k, int sm_count) {
  const int64_t strips = std::max<int64_t>(1, CeilDiv(n, kNominalStrip));
  const int64_t slots = int64_t{kCtasPerSm} * std::max(sm_count, 1);
  const int64_t most = std::clamp<int64_t>(k / (int64_t{kWarps} * kMinRowsPerWarp), 1, kMaxSplits);
  // Slices of whole 32-row batches; rounding the chunk up can leave the last
  // CTAs without rows, so the split count is recomputed from the chunk.
  auto plan_for = [&](int64_t wanted, bool workspace) {
    SkinnyPlan plan;
    plan.k_chunk = CeilDiv(CeilDiv(k, int64_t{kWarps} * wanted), kChunkAlign) * kChunkAlign;
    plan.splits = static_cast<int>(CeilDiv(CeilDiv(k, plan.k_chunk), kWarps));
    plan.workspace = workspace && plan.splits > 1;
    return plan;
  };
  if (strips * kMaxClusterSplits * 2 < slots && most > kMaxClusterSplits) {
    // Too narrow for clusters: split K through workspace until the slots fill.
    return plan_for(std::min(most, CeilDiv(slots, strips)), true);
  }
  // Among 1..8 splits, the one whose CTAs fill their last wave best; more
  // splits only for a clearly better fill (each adds a cross-CTA reduction).
  // Clusters are placed within a GPC, so not every slot takes one: on the
  // H200 62 clusters of 6 CTAs fit where 66 would by the count (3 CTAs an SM).
  SkinnyPlan best = plan_for(1, false);
  double best_fill = 0;
  for (int64_t s = 1; s <= std::min<int64_t>(most, kMaxClusterSplits); ++s) {
    const SkinnyPlan plan = plan_for(s, false);
    const int64_t ctas = strips * plan.splits;
    // At least one cluster a wave: with few SMs (a test's sm_count of 1) the
    // 90% share would round to no cluster at all.
    const int64_t clusters = std::max<int64_t>(1, (slots * 9 / 10) / plan.splits);
    const int64_t wave = plan.splits == 1 ? slots : clusters * plan.splits;
    const double fill = static_cast<double>(ctas) / static_cast<double>(CeilDiv(ctas, wave) * wave);
    if (fill > best_fill + 0.05) {
      best_fill = fill;
      best = plan;
    }
  }
  return best;
}

size_t SkinnyWorkspaceBytes(const LaunchArgs& args) {
  if (args.m < 1 || args.n < 1 || args.k < 1) return 0;
  const SkinnyPlan plan = MakeSkinnyPlan(args.n, args.k, args.sm_count);
  if (!plan.workspace) return 0;
  return static_cast<size_t>(plan.splits) * static_cast<size_t>(args.m) *
         static_cast<size_t>(args.n) * sizeof(float);
}

cudaError_t LaunchSkinny(const LaunchArgs& args, cudaStream_t stream) {
  if (!DimsInRange(args) || args.m > kSkinnyMaxM || args.a == nullptr || args.b == nullptr ||
      args.c == nullptr) {
    return cudaErrorInvalidValue;
  }
  const SkinnyPlan plan = MakeSkinnyPlan(args.n, args.k, args.sm_count);
  if (plan.workspace &&
      (args.workspace == nullptr || args.workspace_bytes < SkinnyWorkspaceBytes(args))) {
    return cudaErrorInvalidValue;
  }
  Params p;
  p.a = static_cast<const uint16_t*>(args.a);
  p.b = static_cast<const uint16_t*>(args.b);
  p.c = static_cast<uint16_t*>(args.c);
  p.partials = plan.workspace ? static_cast<float*>(args.workspace) : nullptr;
  p.m = args.m;
  p.n = args.n;
  p.k = args.k;
  p.k_chunk = plan.k_chunk;
  p.a_vec = args.k % 4 == 0 && Aligned(args.a, 8);
  switch (args.dtype) {
    case DType::kF16:
      return LaunchDtype<false>(args, plan, p, stream);
    case DType::kBF16:
      return LaunchDtype<true>(args, plan, p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace arbiter::kernels
