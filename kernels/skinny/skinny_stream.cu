// skinny_stream: C[M, N] = A[M, K] B[K, N] for M <= 64, streaming B once.
//
// The tensor cores compute C^T = B^T A^T: mma.sync m16n8k16 with a 16-column x
// 16-k tile of the weight B as the "A" operand and 8 tokens (rows of A) as the
// 16 x 8 "B" operand, so every B element is loaded once and one instruction
// serves 8 tokens.
//
// Launch geometry: grid.x walks N in strips of `columns` (256 or 128) columns,
// one strip per CTA; grid.y walks the K splits (split y takes rows
// [y * k_chunk, (y + 1) * k_chunk)); no axis walks M: every CTA carries all M
// rows, in TG groups of 8 tokens (TG = 1, 2, 4, 8 for M <= 8, 16, 32, 64). A CTA
// has one warp per 32 columns; warp w owns columns [32w, 32w + 32) of the strip
// (two n16 tiles) over the CTA's whole K range, so no reduction runs inside a
// CTA.
//
// The stream: the CTA walks its K range in stages of 32 rows through a ring of
// `stages` slots in shared memory filled by cp.async (stages - 1 in flight while
// one is computed; one __syncthreads per stage). Each lane copies 16 bytes, so a
// warp's copy instruction covers one whole 512-byte run of a k row (256-column
// strips) or two 256-byte runs: the DRAM sees long sequential bursts, and the
// copies bypass L1 with an L2 evict-first policy (B is read once; it should not
// push out what other work keeps in L2). A stage's 32 rows of B are stored
// row-major with the 16-byte chunks of row r XOR-swizzled by r % 8, so the 8 row
// addresses of each ldmatrix.trans hit 8 different bank groups; A's 32 k values
// per token sit in 80-byte rows (64 + 16 padding) for the same reason.
//
// Reduction, in a fixed order everywhere (no atomics): each f32 accumulator
// walks its CTA's K range in 16-row steps upwards; then the splits of a strip
// are added s0 + s1 + ... in split order: with <= 8 splits in a cluster (the
// splits of a strip are its CTAs; each adds a share of the strip's elements over
// distributed shared memory), else each CTA writes an f32 slab [y][M][N] to
// workspace and LaunchSplitReduce (kernels/common/split_reduce.h) adds the slabs.
// Bitwise run-to-run deterministic. The plan depends on N, K, the SM count and
// the config, never on M, and a token's mma chain is the same in every member
// TG selects: batch invariant.
//
// Ragged shapes, with no copies: rows past the K range and columns past N load
// as zeros (cp.async src-size 0); the B copy width follows N's alignment
// (16 bytes when N % 8 == 0, 4 when N is even, 2-byte element loads for odd N),
// A is copied 16 bytes at a time when K % 8 == 0 and by elements otherwise.
// Indexing is 64-bit.
//
// Spans (the span config at N % 8 != 0): 16-byte copies at any N. Row k of a
// strip starts at element kN + n0, d_k = (kN + n0) % 8 elements past a 16-byte
// boundary; the kCols / 8 + 1 aligned chunks that cover it land as one row of
// the stage (272 bytes for 128 columns), the row's element n at n - n0 + d_k.
// As k_chunk and n0 are multiples of 32 and 128, d_k = (k % 32) N % 8 for a
// stage row: the same in every stage and every CTA, so every landing offset is
// computed once. A chunk's src-size stops at the end of its k row (zeros for n
// >= N); rows past the CTA's range copy 0 bytes. The chunk that crosses B's
// end is moved by element loads instead (memcheck counts a src-size-limited
// cp.async's whole 16-byte window as read), so no byte past B's end is read.
// ldmatrix needs 16-byte aligned rows, so the mma B^T fragments (two
// consecutive k at one n per register) come from 16-bit shared loads instead
// (eight per mma instead of one ldmatrix.x4 per two). A load's 4 rows (lane % 4)
// sit 2 * 272 / 4 = 136 words = 8 banks apart, each row's 8 columns (lane / 4)
// within 4-5 consecutive words and at most 3.5 words shifted by its
// misalignment: no two rows share a bank, one wavefront per load (every load of
// every warp, for each of the 8 values of N % 8, counted offline).

#include "kernels/skinny/skinny_stream.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <cooperative_groups.h>

#include "kernels/common/mma_sync.cuh"
#include "kernels/common/split_reduce.h"
#include "kernels/common/storage.cuh"
#include "kernels/common/tile_mainloop.cuh"
#include "kernels/skinny/skinny_spans.h"

namespace arbiter::kernels {
namespace {

namespace cg = cooperative_groups;
using mma_tile::CpAsyncCommit;
using mma_tile::CpAsyncWait;
using mma_tile::LdMatrixX4;
using mma_tile::LdMatrixX4Trans;
using mma_tile::SmemAddress;

constexpr int kRows = 32;             // k rows per stage (two k16 steps)
constexpr int kARowBytes = 80;        // one token's 32 k values + 16 bytes of padding
constexpr int kMaxClusterSplits = 8;  // portable cluster size
constexpr int kMinRowsPerCta = 128;   // a CTA with fewer rows is mostly ramp-up
constexpr int kMaxSplits = 4096;

// Shared-memory layout of a CTA with `kCols` columns, TG token groups and
// kStages slots: the ring, reused after the main loop for the cluster
// reduction's f32 partial tile.
template <int kCols, int TG, int kStages, bool kSpans = false>
struct Tile {
  static constexpr int kTokens = 8 * TG;
  // A landing row of the span path holds the row's aligned-down span.
  static constexpr int kBRowBytes = kSpans ? SkinnySpanChunks(kCols) * 16 : kCols * 2;
  static constexpr int kBBytes = kRows * kBRowBytes;
  static constexpr int kABytes = kTokens * kARowBytes;
  static constexpr int kStageBytes = kBBytes + kABytes;
  static constexpr int kRedStride = kCols + 4;  // floats: a lane quad's 4 tokens on 4 bank groups
  static constexpr int kRedBytes = kTokens * kRedStride * 4;
  static constexpr int kSmemBytes =
      kStages * kStageBytes > kRedBytes ? kStages * kStageBytes : kRedBytes;
  static_assert(kCols == 128 || kCols == 256);
  static_assert(kStages >= 2);
  static_assert(kStageBytes % 16 == 0);
};

// The ring depth a member runs with. The splits of a strip meet in a cluster,
// and a cluster's CTAs must be resident together in one GPC: when a wider A
// (more token groups) grows the ring until no more CTAs fit an SM than the plan
// counts on (ctas_per_sm), GPC-sized holes are left and the last clusters wait
// for a second wave (at 64 x 4096 x 4096, s128x6c2 at 2 CTAs an SM fitted 30 of
// its 32 clusters of 8 and took twice its one-wave time). So in a cluster
// launch the ring keeps the one-group footprint and loses stages instead (at
// least 3: two in flight). The depth never changes the arithmetic.
template <int kCols, int TG, int kStages, int kMode, bool kSpans = false>
constexpr int RingStages() {
  if constexpr (kMode != 1 || TG == 1) {
    return kStages;
  } else {
    constexpr int kFit = kStages * Tile<kCols, 1, kStages, kSpans>::kStageBytes /
                         Tile<kCols, TG, kStages, kSpans>::kStageBytes;
    return kFit < 3 ? 3 : (kFit > kStages ? kStages : kFit);
  }
}

struct Params {
  const uint16_t* a;
  const uint16_t* b;
  uint16_t* c;
  float* partials;  // workspace slabs, or null
  int64_t m, n, k;
  int64_t k_chunk;
  bool a_vec;  // A copied 16 bytes at a time (K % 8 == 0, A 16-byte aligned)
};

// B is read once: an L2 evict-first policy for its copies.
__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// Global->shared copies of 16 or 4 bytes, L1 bypassed for 16; src_bytes 0
// writes zeros and reads nothing (src must still be a valid address).
__device__ __forceinline__ void CopyStream16(uint32_t dst, const void* src, bool ok,
                                             uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(dst),
               "l"(src), "r"(ok ? 16 : 0), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void CopyStream4(uint32_t dst, const void* src, bool ok,
                                            uint64_t policy) {
  asm volatile("cp.async.ca.shared.global.L2::cache_hint [%0], [%1], 4, %2, %3;" ::"r"(dst),
               "l"(src), "r"(ok ? 4 : 0), "l"(policy)
               : "memory");
}
// A span chunk: the first `bytes` (0-16) of 16 aligned bytes, zeros after;
// L1 bypassed. No L2 cache hint: in the first H200 run of the span kernels
// (bench/results/skinny-h200.md, run 7) this copy with the evict-first hint
// trapped (illegal instruction, one PC in the prologue) in warp 0 of every CTA
// and in no other warp - warp 0 alone issues the fifth copy of a stage, the
// one behind a branch - which matches a ptxas fault reported on sm_90 (an
// LDGSTS reading its L2 policy descriptor from a uniform register that is
// never set on that path). Until the SASS is checked, no hint here.
__device__ __forceinline__ void CopyStreamPrefix(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
}
// The span chunk that crosses B's end (skinny_spans.h, SkinnySpanCopyOf): its
// first `bytes` (2-14) by 16-bit loads, zeros after, one 16-byte shared store;
// nothing read past B[first + bytes / 2 - 1].
__device__ __forceinline__ void CopySpanElements(uint32_t dst, const uint16_t* src, int bytes) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = 4 * i < bytes ? __ldg(reinterpret_cast<const unsigned short*>(src + 2 * i)) : 0u;
    const uint32_t hi =
        4 * i + 2 < bytes ? __ldg(reinterpret_cast<const unsigned short*>(src + 2 * i + 1)) : 0u;
    w[i] = lo | (hi << 16);
  }
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(w[0]), "r"(w[1]),
               "r"(w[2]), "r"(w[3])
               : "memory");
}
__device__ __forceinline__ void Copy16(uint32_t dst, const void* src, bool ok) {
  mma_tile::CpAsync16(dst, src, ok ? 16 : 0);
}
// One 16-bit element through registers (what cp.async cannot copy): zero where
// `ok` is false, with no access there.
__device__ __forceinline__ void CopyElement(uint32_t dst, const uint16_t* src, bool ok) {
  const unsigned short v = ok ? __ldg(reinterpret_cast<const unsigned short*>(src)) : 0;
  asm volatile("st.shared.u16 [%0], %1;" ::"r"(dst), "h"(v) : "memory");
}

// kWidth for the span path: 16-byte copies of each row's aligned-down span.
constexpr int kSpanWidth = 0;

// kWidth: bytes per B copy (16, 4, 2 = element loads, or kSpanWidth). kMode:
// 0 = one split, write C; 1 = splits in a cluster, added over DSMEM; 2 =
// splits to workspace slabs.
template <bool kBf16, int TG, int kCols, int kStages, int kWidth, int kMode>
__global__ void __launch_bounds__(kCols, kCols == 256 ? 2 : 4)
    SkinnyStreamKernel(const Params p) {
  constexpr bool kSpans = kWidth == kSpanWidth;
  using T = Tile<kCols, TG, kStages, kSpans>;
  static_assert(kWidth == 16 || kWidth == 4 || kWidth == 2 || kSpans);
  extern __shared__ __align__(128) uint8_t smem[];

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kCols;
  const int64_t kbeg = static_cast<int64_t>(blockIdx.y) * p.k_chunk;
  const int64_t kend = min(p.k, kbeg + p.k_chunk);
  const int steps = kbeg < kend ? static_cast<int>((kend - kbeg + kRows - 1) / kRows) : 0;
  // Token groups wholly past M are neither copied nor computed (uniform per CTA).
  const int live_groups = static_cast<int>(min(static_cast<int64_t>(TG), (p.m + 7) / 8));
  const uint32_t ring = SmemAddress(smem);

  float acc[2][TG][4];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int t = 0; t < TG; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][t][i] = 0.f;
    }
  }

  const uint64_t policy = EvictFirstPolicy();
  const int rows = static_cast<int>(kend - kbeg);  // K rows of this CTA (<= k_chunk < 2^31)

  // What each thread copies, fixed for the whole K range: a copy's offsets in
  // global memory and in the stage move by 32 rows per stage, so a stage's
  // copies cost one add and one compare each (at 64 rows, recomputing the
  // 64-bit addresses per stage was ~10 instructions per mma).
  // B: a pass of the CTA covers kWidth / 2 rows of the strip; thread x copies
  // column `bcol` of rows r0, r0 + kWidth / 2, ...
  constexpr int kPerRow = kCols * 2 / (kSpans ? 16 : kWidth);  // copies per row of the strip
  constexpr int kRowsPerPass = kCols / kPerRow;
  constexpr int kPerThread = kRows / kRowsPerPass;
  const int r0 = threadIdx.x / kPerRow;
  const int bcol = (threadIdx.x % kPerRow) * (kWidth / 2);
  // N's alignment matches the copy width: a copy is wholly inside or outside.
  const bool bcol_ok = n0 + bcol < p.n;
  const int64_t b_first = (kbeg + r0) * p.n + n0 + bcol;  // element offset at stage 0, copy 0
  const int64_t b_stage = int64_t{kRows} * p.n;           // ... per stage
  const int64_t b_pass = int64_t{kRowsPerPass} * p.n;     // ... per copy
  // Spans: copy j of a thread is chunk `e % kSpanChunks` of stage row `e /
  // kSpanChunks` (e = thread + j * kCols; the last j only for e < kSpanCopies):
  // its aligned element offset at stage 0, its landing offset and how many of
  // its bytes lie before the row's end, all the same in every stage.
  constexpr int kSpanChunks = SkinnySpanChunks(kCols);
  constexpr int kSpanCopies = kRows * kSpanChunks;
  constexpr int kSpanPerThread = kSpans ? (kSpanCopies + kCols - 1) / kCols : 1;
  int64_t span_first[kSpanPerThread];
  uint32_t span_dst[kSpanPerThread];
  int span_row[kSpanPerThread];    // stage row; kRows: no copy
  int span_bytes[kSpanPerThread];  // 0-16
  const int64_t b_elements = p.k * p.n;
  if constexpr (kSpans) {
#pragma unroll
    for (int j = 0; j < kSpanPerThread; ++j) {
      const int e = threadIdx.x + j * kCols;
      const int r = e / kSpanChunks, c = e % kSpanChunks;
      const SkinnySpanChunk chunk = SkinnySpanChunkAt(kbeg + r, p.n, n0, c);
      span_row[j] = e < kSpanCopies ? r : kRows;
      span_first[j] = chunk.first;
      span_dst[j] = r * T::kBRowBytes + c * 16;
      span_bytes[j] = chunk.bytes;
    }
  }
  // A: tokens up to `a_groups` groups are copied (zeros past M): for TG >= 2
  // token groups are computed in pairs, so an odd live count copies one more.
  const int a_groups = TG == 1 ? live_groups : min(TG, (live_groups + 1) / 2 * 2);
  constexpr int kAPerThread = (8 * TG * 4 + kCols - 1) / kCols;  // 16-byte A copies a thread
  int64_t a_first[kAPerThread];
  uint32_t a_dst[kAPerThread];
  int a_k[kAPerThread];  // k offset of the chunk inside a stage; >= kRows: no copy
#pragma unroll
  for (int j = 0; j < kAPerThread; ++j) {
    const int e = threadIdx.x + j * kCols;
    const int t = e / 4, q = e % 4;
    const bool live = e < a_groups * 32;
    a_k[j] = live ? 8 * q : kRows;
    a_dst[j] = t * kARowBytes + q * 16;
    // Rows past M keep offset -1: copied as zeros, never read.
    a_first[j] = live && t < p.m ? t * p.k + kbeg + 8 * q : -1;
  }

  // Stage i into its slot: B rows kbeg + 32i .. + 31 of the strip, and A's
  // 32 k values there for each copied token.
  auto issue = [&](int i) {
    const uint32_t sb = ring + (i % kStages) * T::kStageBytes;
    const uint32_t sa = sb + T::kBBytes;
    const int row0 = kRows * i;  // stage's first row inside the CTA's range
    const int64_t b_at = b_first + i * b_stage;
    // 16-byte copies: all 4 issued back to back. The narrow ragged-N copies
    // (16 or 32 per thread) unroll by 4, which keeps their addresses in
    // registers without spilling.
    constexpr int kUnroll = kWidth == 16 ? kPerThread : 4;
    if constexpr (kSpans) {
      const int64_t at = i * b_stage;
#pragma unroll
      for (int j = 0; j < kSpanPerThread; ++j) {
        // Only the last copy can lie past the stage's chunks (warp-uniform).
        if ((j + 1) * kCols > kSpanCopies && span_row[j] >= kRows) continue;
        const int bytes = row0 + span_row[j] < rows ? span_bytes[j] : 0;
        const int64_t first = span_first[j] + at;
        // Only the chunk that crosses B's end leaves the copy (a cold branch).
        if (SkinnySpanCopyOf(first, bytes, b_elements) == SkinnySpanCopy::kElements) {
          CopySpanElements(sb + span_dst[j], p.b + first, bytes);
        } else {
          CopyStreamPrefix(sb + span_dst[j], bytes > 0 ? p.b + first : p.b, bytes);
        }
      }
    } else {
#pragma unroll kUnroll
      for (int u = 0; u < kPerThread; ++u) {
        const int r = r0 + u * kRowsPerPass;
        const bool ok = bcol_ok && row0 + r < rows;
        const uint32_t dst = sb + r * (kCols * 2) + (((bcol / 8) ^ (r % 8)) * 16) + (bcol % 8) * 2;
        const uint16_t* src = ok ? p.b + (b_at + u * b_pass) : p.b;
        if constexpr (kWidth == 16) {
          CopyStream16(dst, src, ok, policy);
        } else if constexpr (kWidth == 4) {
          CopyStream4(dst, src, ok, policy);
        } else {
          CopyElement(dst, src, ok);
        }
      }
    }
    if (p.a_vec) {
      // K % 8 == 0 and stages start at multiples of 32: a chunk of 8 k values
      // is wholly inside or outside the CTA's range.
#pragma unroll
      for (int j = 0; j < kAPerThread; ++j) {
        if (a_k[j] >= kRows) continue;
        const bool ok = a_first[j] >= 0 && row0 + a_k[j] < rows;
        Copy16(sa + a_dst[j], ok ? p.a + (a_first[j] + row0) : p.a, ok);
      }
    } else {
      const int64_t k0 = kbeg + row0;
      for (int e = threadIdx.x; e < a_groups * 8 * kRows; e += kCols) {
        const int t = e / kRows, q = e % kRows;
        const int64_t ka = k0 + q;
        const bool ok = t < p.m && ka < kend;
        CopyElement(sa + t * kARowBytes + q * 2, ok ? p.a + t * p.k + ka : p.a, ok);
      }
    }
  };

  // Spans: the B^T fragment register q of tile j at step s holds n = 32 warp
  // + 16j + g + 8 (q % 2), k = 16s + 8 (q / 2) + 2c and k + 1 (g = lane / 4, c
  // = lane % 4): eight landing rows per lane, each at its own misalignment; their
  // byte offsets in a stage (column 32 warp + g) are fixed for the whole K range.
  uint32_t span_read[kSpans ? 2 : 1][2][2];  // [k16 step][k + 8][k + 1]
  if constexpr (kSpans) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int o = 0; o < 2; ++o) {
          const int r = 16 * s + 8 * h + 2 * (lane % 4) + o;
          const int d = static_cast<int>(SkinnySpanMisalignment(kbeg + r, p.n, n0));
          span_read[s][h][o] = r * T::kBRowBytes + 2 * (d + warp * 32 + lane / 4);
        }
      }
    }
  }

  // Stage in `slot`: two k16 steps over the warp's two n16 tiles.
  auto compute = [&](int slot) {
    const uint32_t sb = ring + slot * T::kStageBytes;
    const uint32_t sa = sb + T::kBBytes;
    const int q = lane / 8, rr = lane % 8;
    uint32_t bfrag[2][2][4];  // [k16 step][n16 tile]
    if constexpr (kSpans) {
      // Two 16-bit loads per register (rows k and k + 1 at one n), low half k.
      const uint8_t* stage = smem + slot * T::kStageBytes;
#pragma unroll
      for (int s = 0; s < 2; ++s) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const int col = 2 * (16 * j + 8 * (x % 2));
            const uint32_t lo =
                *reinterpret_cast<const uint16_t*>(stage + span_read[s][x / 2][0] + col);
            const uint32_t hi =
                *reinterpret_cast<const uint16_t*>(stage + span_read[s][x / 2][1] + col);
            bfrag[s][j][x] = lo | (hi << 16);
          }
        }
      }
    } else {
      // ldmatrix.x4.trans: lanes 8q .. 8q + 7 address matrix q's 8 k rows; matrix
      // q holds n (q % 2) * 8 .. + 7 and k (q / 2) * 8 .. + 7 of the tile, which
      // makes the four registers the a0a1, a2a3, a4a5, a6a7 fragments of B^T.
#pragma unroll
      for (int s = 0; s < 2; ++s) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int r = s * 16 + (q / 2) * 8 + rr;
          const int chunk = warp * 4 + j * 2 + q % 2;
          LdMatrixX4Trans(bfrag[s][j], sb + r * (kCols * 2) + ((chunk ^ rr) * 16));
        }
      }
    }
    if constexpr (TG == 1) {
      // ldmatrix.x4: matrix q = tokens 0 .. 7 at k 8q .. 8q + 7, so registers
      // {0, 1} are step 0's b0b1, b2b3 and {2, 3} step 1's.
      uint32_t afrag[4];
      LdMatrixX4(afrag, sa + rr * kARowBytes + q * 16);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const uint32_t b[2] = {afrag[2 * s], afrag[2 * s + 1]};
#pragma unroll
        for (int j = 0; j < 2; ++j) Mma16816<kBf16>(acc[j][0], bfrag[s][j], b);
      }
    } else {
      // Step 0 over every token group, then step 1: an accumulator's two mma
      // are 2 * TG instructions apart instead of back to back (at 64 rows the
      // dependent pairs were the largest stall). ldmatrix.x4: matrix q = tokens
      // of group t + q / 2 at k 16s + 8 (q % 2): registers {0, 1} are group t's
      // b0b1, b2b3 of step s and {2, 3} group t + 1's.
#pragma unroll
      for (int s = 0; s < 2; ++s) {
#pragma unroll
        for (int t = 0; t < TG; t += 2) {
          if (t >= live_groups) break;
          uint32_t afrag[4];
          LdMatrixX4(afrag, sa + ((t + q / 2) * 8 + rr) * kARowBytes + s * 32 + (q % 2) * 16);
          const uint32_t b0[2] = {afrag[0], afrag[1]};
          const uint32_t b1[2] = {afrag[2], afrag[3]};
#pragma unroll
          for (int j = 0; j < 2; ++j) Mma16816<kBf16>(acc[j][t], bfrag[s][j], b0);
#pragma unroll
          for (int j = 0; j < 2; ++j) Mma16816<kBf16>(acc[j][t + 1], bfrag[s][j], b1);
        }
      }
    }
  };

  // stages - 1 in flight ahead of the one computed; one commit group per stage
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
  }
  CpAsyncWait<0>();

  // D fragment (tile j, group t): d0, d1 = column 32w + 16j + g, tokens
  // 8t + 2c, 8t + 2c + 1; d2, d3 = the same tokens at column + 8.
  const int g = lane / 4, cq = lane % 4;
  auto for_each_result = [&](auto&& f) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int t = 0; t < TG; ++t) {
        const int col = warp * 32 + j * 16 + g;
        const int token = 8 * t + 2 * cq;
        f(token, col, acc[j][t][0]);
        f(token + 1, col, acc[j][t][1]);
        f(token, col + 8, acc[j][t][2]);
        f(token + 1, col + 8, acc[j][t][3]);
      }
    }
  };

  if constexpr (kMode == 0) {
    for_each_result([&](int token, int col, float v) {
      if (token < p.m && n0 + col < p.n) p.c[token * p.n + n0 + col] = ToStorage<kBf16>(v);
    });
  } else if constexpr (kMode == 2) {
    for_each_result([&](int token, int col, float v) {
      if (token < p.m && n0 + col < p.n) {
        p.partials[(blockIdx.y * p.m + token) * p.n + n0 + col] = v;
      }
    });
  } else {
    // The splits of this strip are the cluster's CTAs, rank = blockIdx.y (the
    // cluster spans grid.y). Each CTA leaves its partial tile in its own
    // shared memory (the ring, now idle); rank r adds its share of the
    // strip's elements over all ranks in rank order, then the cluster waits so
    // that no CTA leaves while its shared memory is still being read.
    float* red = reinterpret_cast<float*>(smem);
    __syncthreads();  // every warp is done with the ring
    for_each_result([&](int token, int col, float v) { red[token * T::kRedStride + col] = v; });
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    const int splits = static_cast<int>(cluster.num_blocks());
    const int rank = static_cast<int>(cluster.block_rank());
    const int count = static_cast<int>(min(static_cast<int64_t>(T::kTokens), p.m)) * kCols;
    const int per = (count + splits - 1) / splits;
    const int hi = min(count, (rank + 1) * per);
    for (int e = rank * per + threadIdx.x; e < hi; e += kCols) {
      const int token = e / kCols, col = e % kCols;
      float* local = &red[token * T::kRedStride + col];
      float s = *cluster.map_shared_rank(local, 0);
      for (int r = 1; r < splits; ++r) s += *cluster.map_shared_rank(local, r);
      if (n0 + col < p.n) p.c[token * p.n + n0 + col] = ToStorage<kBf16>(s);
    }
    cluster.sync();
  }
}

// ---- host side -------------------------------------------------------------------

// Raises one instantiation's dynamic shared-memory limit once per device.
template <auto kKernel>
cudaError_t EnsureSmemLimit(int bytes) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < kMaxDevices && done[device].load(std::memory_order_acquire)) return cudaSuccess;
  err = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess && device < kMaxDevices) done[device].store(true, std::memory_order_release);
  return err;
}

struct Launch {
  const LaunchArgs* args;
  SkinnyStreamPlan plan;
  Params params;
  cudaStream_t stream;
};

template <bool kBf16, int TG, int kCols, int kStages, int kWidth>
cudaError_t LaunchTile(const Launch& l) {
  constexpr bool kSpans = kWidth == kSpanWidth;
  const dim3 grid(static_cast<unsigned>(CeilDiv(l.args->n, kCols)),
                  static_cast<unsigned>(l.plan.splits));
  if (l.plan.workspace) {
    constexpr int kSmem = Tile<kCols, TG, kStages, kSpans>::kSmemBytes;
    constexpr auto kKernel = &SkinnyStreamKernel<kBf16, TG, kCols, kStages, kWidth, 2>;
    cudaError_t err = EnsureSmemLimit<kKernel>(kSmem);
    if (err != cudaSuccess) return err;
    kKernel<<<grid, kCols, kSmem, l.stream>>>(l.params);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    // The slabs in split order (kernels/common/split_reduce.h).
    return LaunchSplitReduce(l.args->dtype, l.params.partials, l.args->m * l.args->n,
                             l.plan.splits, l.args->c, l.stream);
  }
  if (l.plan.splits == 1) {
    constexpr int kSmem = Tile<kCols, TG, kStages, kSpans>::kSmemBytes;
    constexpr auto kKernel = &SkinnyStreamKernel<kBf16, TG, kCols, kStages, kWidth, 0>;
    const cudaError_t err = EnsureSmemLimit<kKernel>(kSmem);
    if (err != cudaSuccess) return err;
    kKernel<<<grid, kCols, kSmem, l.stream>>>(l.params);
    return cudaGetLastError();
  }
  constexpr int kRing = RingStages<kCols, TG, kStages, 1, kSpans>();
  constexpr int kSmem = Tile<kCols, TG, kRing, kSpans>::kSmemBytes;
  constexpr auto kKernel = &SkinnyStreamKernel<kBf16, TG, kCols, kRing, kWidth, 1>;
  const cudaError_t err = EnsureSmemLimit<kKernel>(kSmem);
  if (err != cudaSuccess) return err;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(kCols);
  config.dynamicSmemBytes = kSmem;
  config.stream = l.stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = 1;
  attribute[0].val.clusterDim.y = static_cast<unsigned>(l.plan.splits);
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  const cudaError_t launched = cudaLaunchKernelEx(&config, kKernel, l.params);
  if (launched != cudaSuccess) return launched;
  return cudaGetLastError();
}

// The built (columns, stages) pairs: the default for every dtype and width,
// 128 x 4 also for the even ragged N (4-byte copies) of both dtypes, the wide
// config (256 x 4) for both dtypes at 16-byte copies, the others for bf16 at
// 16-byte copies.
template <bool kBf16, int TG, int kWidth>
cudaError_t LaunchConfig(const Launch& l, const SkinnyStreamConfig& config) {
  const int cols = config.columns, stages = config.stages;
  if (cols == kSkinnyStreamDefault.columns && stages == kSkinnyStreamDefault.stages) {
    return LaunchTile<kBf16, TG, kSkinnyStreamDefault.columns, kSkinnyStreamDefault.stages,
                      kWidth>(l);
  }
  if constexpr (kWidth == 4) {
    if (cols == 128 && stages == 4) return LaunchTile<kBf16, TG, 128, 4, kWidth>(l);
  }
  if constexpr (kWidth == 16) {
    if (cols == kSkinnyStreamWide.columns && stages == kSkinnyStreamWide.stages) {
      return LaunchTile<kBf16, TG, kSkinnyStreamWide.columns, kSkinnyStreamWide.stages, kWidth>(l);
    }
  }
  if constexpr (kBf16 && kWidth == 16) {
    if (cols == 256 && stages == 6) return LaunchTile<kBf16, TG, 256, 6, kWidth>(l);
    if (cols == 256 && stages == 8) return LaunchTile<kBf16, TG, 256, 8, kWidth>(l);
    if (cols == 128 && stages == 4) return LaunchTile<kBf16, TG, 128, 4, kWidth>(l);
    if (cols == 128 && stages == 8) return LaunchTile<kBf16, TG, 128, 8, kWidth>(l);
  }
  return cudaErrorInvalidValue;
}

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <bool kBf16, int TG>
cudaError_t LaunchGroups(const Launch& l, const SkinnyStreamConfig& config) {
  const LaunchArgs& args = *l.args;
  if (args.n % 8 == 0 && Aligned(args.b, 16)) return LaunchConfig<kBf16, TG, 16>(l, config);
  if (config.spans && Aligned(args.b, 16)) {
    // The span path is built for the span config at one and two token groups.
    if constexpr (TG <= 2) {
      if (config.columns == kSkinnyStreamRagged.columns &&
          config.stages == kSkinnyStreamRagged.stages) {
        return LaunchTile<kBf16, TG, kSkinnyStreamRagged.columns, kSkinnyStreamRagged.stages,
                          kSpanWidth>(l);
      }
    }
    return cudaErrorInvalidValue;
  }
  if (args.n % 2 == 0 && Aligned(args.b, 4)) return LaunchConfig<kBf16, TG, 4>(l, config);
  return LaunchConfig<kBf16, TG, 2>(l, config);
}

template <bool kBf16>
cudaError_t LaunchDtype(const Launch& l, const SkinnyStreamConfig& config) {
  const int64_t m = l.args->m;
  if (m <= 8) return LaunchGroups<kBf16, 1>(l, config);
  if (m <= 16) return LaunchGroups<kBf16, 2>(l, config);
  if (m <= 32) return LaunchGroups<kBf16, 4>(l, config);
  return LaunchGroups<kBf16, 8>(l, config);
}

cudaError_t LaunchDefault(const LaunchArgs& args, cudaStream_t stream) {
  return LaunchSkinnyStream(args, kSkinnyStreamDefault, stream);
}
size_t DefaultWorkspaceBytes(const LaunchArgs& args) {
  return SkinnyStreamWorkspaceBytes(args, kSkinnyStreamDefault);
}
cudaError_t LaunchRagged(const LaunchArgs& args, cudaStream_t stream) {
  if (SkinnyStreamRaggedUnsupportedReason(args) != nullptr) return cudaErrorInvalidValue;
  return LaunchSkinnyStream(args, kSkinnyStreamRagged, stream);
}
size_t RaggedWorkspaceBytes(const LaunchArgs& args) {
  return SkinnyStreamWorkspaceBytes(args, kSkinnyStreamRagged);
}
cudaError_t LaunchWide(const LaunchArgs& args, cudaStream_t stream) {
  return LaunchSkinnyStream(args, kSkinnyStreamWide, stream);
}
size_t WideWorkspaceBytes(const LaunchArgs& args) {
  return SkinnyStreamWorkspaceBytes(args, kSkinnyStreamWide);
}

}  // namespace

// One wave: as many splits as let every strip's CTAs fit the SMs at
// ctas_per_sm each, so that all of them stream at once and finish together
// (a bandwidth-bound kernel loses most in a partial last wave); at least
// kMinRowsPerCta rows per CTA. A cluster config keeps to 8 splits (portable
// clusters) while those still fill half the slots; past that, and in a config
// without clusters, the splits are added through workspace.
SkinnyStreamPlan MakeSkinnyStreamPlan(int64_t n, int64_t k, int sm_count,
                                      const SkinnyStreamConfig& config) {
  const int64_t strips = std::max<int64_t>(1, CeilDiv(n, std::max(config.columns, 1)));
  const int64_t slots = int64_t{std::max(config.ctas_per_sm, 1)} * std::max(sm_count, 1);
  const int64_t most = std::clamp<int64_t>(k / kMinRowsPerCta, 1, kMaxSplits);
  int64_t wanted = std::clamp<int64_t>(slots / strips, 1, most);
  bool cluster = config.cluster;
  if (cluster && wanted > kMaxClusterSplits) {
    // Clusters of 8 that still fill half the slots beat a second kernel.
    if (strips * kMaxClusterSplits * 2 >= slots) {
      wanted = kMaxClusterSplits;
    } else {
      cluster = false;
    }
  }
  SkinnyStreamPlan plan;
  plan.k_chunk = CeilDiv(CeilDiv(k, wanted), kRows) * kRows;
  // Rounding the chunk up can leave the last splits without rows.
  plan.splits = static_cast<int>(CeilDiv(k, plan.k_chunk));
  plan.workspace = plan.splits > 1 && !cluster;
  return plan;
}

size_t SkinnyStreamWorkspaceBytes(const LaunchArgs& args, const SkinnyStreamConfig& config) {
  if (args.m < 1 || args.n < 1 || args.k < 1) return 0;
  const SkinnyStreamPlan plan = MakeSkinnyStreamPlan(args.n, args.k, args.sm_count, config);
  if (!plan.workspace) return 0;
  return static_cast<size_t>(plan.splits) * static_cast<size_t>(args.m) *
         static_cast<size_t>(args.n) * sizeof(float);
}

cudaError_t LaunchSkinnyStream(const LaunchArgs& args, const SkinnyStreamConfig& config,
                               cudaStream_t stream) {
  if (!DimsInRange(args) || args.m > kSkinnyStreamMaxM || args.a == nullptr ||
      args.b == nullptr || args.c == nullptr) {
    return cudaErrorInvalidValue;
  }
  Launch l;
  l.args = &args;
  l.plan = MakeSkinnyStreamPlan(args.n, args.k, args.sm_count, config);
  l.stream = stream;
  if (l.plan.workspace &&
      (args.workspace == nullptr || args.workspace_bytes < SkinnyStreamWorkspaceBytes(args, config))) {
    return cudaErrorInvalidValue;
  }
  Params& p = l.params;
  p.a = static_cast<const uint16_t*>(args.a);
  p.b = static_cast<const uint16_t*>(args.b);
  p.c = static_cast<uint16_t*>(args.c);
  p.partials = l.plan.workspace ? static_cast<float*>(args.workspace) : nullptr;
  p.m = args.m;
  p.n = args.n;
  p.k = args.k;
  p.k_chunk = l.plan.k_chunk;
  p.a_vec = args.k % 8 == 0 && Aligned(args.a, 16);
  switch (args.dtype) {
    case DType::kF16:
      return LaunchDtype<false>(l, config);
    case DType::kBF16:
      return LaunchDtype<true>(l, config);
    default:
      return cudaErrorInvalidValue;
  }
}

const char* SkinnyStreamRaggedUnsupportedReason(const LaunchArgs& args) {
  if (!DimsInRange(args)) return "M, N and K must be in [1, 2^31)";
  if (args.dtype != DType::kF16 && args.dtype != DType::kBF16) return "dtype must be f16 or bf16";
  if (args.n % 8 == 0) return "N % 8 == 0 takes the default config's path (raced as skinny)";
  if (args.m > kSkinnyStreamRaggedMaxM) return "M must be at most 16 (one or two token groups)";
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) return "null operand";
  if (!Aligned(args.b, 16)) return "B must be 16-byte aligned (its row spans are 16-byte copies)";
  return nullptr;
}

const Launcher kSkinnyStream = {"LaunchSkinnyStream", LaunchDefault, DefaultWorkspaceBytes};
const Launcher kSkinnyStreamWideLauncher = {"LaunchSkinnyStreamWide", LaunchWide,
                                            WideWorkspaceBytes};
const Launcher kSkinnyStreamRaggedLauncher = {"LaunchSkinnyStreamRagged", LaunchRagged,
                                              RaggedWorkspaceBytes,
                                              SkinnyStreamRaggedUnsupportedReason};

}  // namespace arbiter::kernels
