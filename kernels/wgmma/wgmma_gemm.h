// wgmma: a Hopper (sm_90a) GEMM, C[M,N] = A[M,K] * B[K,N], all row-major,
// f16 or bf16 in and out, f32 accumulation.
//
// How it runs: a persistent grid (one CTA per SM) walks output tiles in a fixed
// order. In each CTA one producer warpgroup issues TMA loads of A and B into a
// ring of 128B-swizzled shared-memory stages, each completing on an mbarrier;
// two consumer warpgroups each own 64 rows of the tile and run wgmma m64nNk16
// on those stages (A K-major, B MN-major via the transpose bit), keeping one
// batch of wgmma in flight while releasing the previous stage. The producer
// runs ahead into the next tile while the consumers stage C through shared
// memory in 64 x 64 boxes that TMA stores asynchronously (clipping the edges).
//
// Launch geometry: the grid is one-dimensional, gridDim.x = min(tiles, SMs).
// CTA b computes tiles b, b + gridDim.x, ...; with the split tile, gridDim.x =
// clusters x splits and cluster b / splits computes tiles b / splits, + clusters,
// ..., rank b % splits taking its range of k-blocks. WgmmaTileAt maps a tile index to
// (m tile, n tile): consecutive indices walk down M inside a group of
// `group_m` tile rows, then across N, so the CTAs in flight share A rows and B
// columns in L2. Both the kernel and the tests use WgmmaTileAt.
//
// Stream-K tiles (the *StreamK values): the work is tiles x k-blocks units
// (64-deep k-blocks, tiles in WgmmaTileAt order, k-blocks in order inside a
// tile), and gridDim.x = G = min(SMs, units, kWgmmaStreamKMaxCtas) persistent
// CTAs, one per SM, where CTA c walks units [c * U / G, (c + 1) * U / G)
// (WgmmaSegmentWalk: the producer and the consumers walk the same segments,
// each a run of one tile's k-blocks). A segment that covers its whole tile
// stores C as above. One that starts past the tile's first k-block - always
// its CTA's first segment, so a CTA has at most one - is a contributor: it
// writes its f32 accumulators to workspace slot c and raises flag c (release). One that starts at k-block 0
// but ends before the last - always its CTA's last segment, so it finishes
// last in time - is the tile's owner: it waits for the flags of CTAs c + 1
// .. WgmmaStreamKCtaOf(the tile's last unit) (acquire), adds their partials in
// that order, lowers the flags again for the next launch, and stores C.
// Owners wait on other CTAs, so every CTA must be resident at once: G <= SMs
// with one CTA per SM (the stages fill shared memory) guarantees it on an idle
// device, and the launcher refuses a grid larger than the device holds (a
// concurrent kernel holding SMs only delays the owners). The partial slots
// are the caller's workspace (WgmmaWorkspaceBytes); the flags are a zeroed
// per-stream buffer (kernels/common/stream_counters.h) that every launch
// leaves at zero, allocated at a stream's first stream-K launch, which must
// therefore not be inside a graph capture.
//
// Determinism: one CTA owns each C tile and walks K in a fixed order with no
// atomics, so the output is bitwise run-to-run deterministic; for a fixed tile
// config a row of C does not depend on M (rows past M are zero-filled by TMA
// and never stored). The split and stream-K tiles add f32 partials in a fixed
// order (cluster rank, CTA index) with no atomics: bitwise run to run for a
// given shape and SM count, but how K is split follows the tile count, hence M.
//
// Needs: K % 8 == 0 and N % 8 == 0 (TMA wants 16-byte row strides) and
// 16-byte-aligned A, B and C; any M. The CpAsync tiles need only an even N
// and 4-byte-aligned B and C (A still goes through TMA). Callers check
// WgmmaUnsupportedReason first.
//
// Plain C++ API (no absl): usable from .cc files compiled by the host compiler.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#if defined(__CUDACC__)
#define WGMMA_HOST_DEVICE __host__ __device__
#else
#define WGMMA_HOST_DEVICE
#endif

namespace arbiter::wgmma {

enum class WgmmaDType { kF16, kBF16 };

// The tile-configuration family. Each is a separate kernel instantiation with
// a fixed tile shape, so choosing one never depends on M.
enum class WgmmaTile {
  k128x128,  // 6 stages; more tiles for mid sizes, where idle SMs matter
  k128x256,  // 4 stages; the large-shape tile (2 x m64n256 per k step)
  // The same tiles with B copied by cp.async and C stored from registers: N
  // need only be even (a ragged vocabulary such as 30522), no padded copies.
  // Correct, but measured at half cublas_padded's speed: not a registered
  // candidate (kernels/wgmma/wgmma_candidate.cc).
  k128x128CpAsync,
  k128x256CpAsync,
  // 64 x 256 tiles, one consumer warpgroup, 4 stages, for few output tiles (M
  // up to a few hundred against a wide weight): when the tiles leave SMs idle,
  // the k-blocks of each tile are split over the CTAs of a cluster (up to 8),
  // which add their f32 partials in distributed shared memory in rank order.
  // The split count follows the tile count, so rows of C depend on M: run to
  // run deterministic, not batch invariant.
  k64x256SplitK,
  // Stream-K (see the file comment): the units of tiles x k-blocks spread
  // evenly over one CTA per SM, so a few tiles against a long K keep every SM
  // streaming B, each tile's partials added by its owner in CTA order. Run to
  // run deterministic, not batch invariant. They need workspace
  // (WgmmaWorkspaceBytes). Correct on the H200, but slower than cuBLASLt at
  // every mid-size shape measured (0.77-0.90x at best): not registered
  // candidates (kernels/wgmma/wgmma_candidate.cc).
  k64x256StreamK,   // 4 stages, one consumer warpgroup: M up to 64 per tile
  k128x256StreamK,  // 4 stages, two consumer warpgroups: B read once for M <= 128
  k128x128StreamK,  // 6 stages
};

inline constexpr WgmmaTile kAllWgmmaTiles[] = {
    WgmmaTile::k128x128,        WgmmaTile::k128x256,        WgmmaTile::k128x128CpAsync,
    WgmmaTile::k128x256CpAsync, WgmmaTile::k64x256SplitK,   WgmmaTile::k64x256StreamK,
    WgmmaTile::k128x256StreamK, WgmmaTile::k128x128StreamK};

// "128x128", "128x256", "128x128_cpasync", "128x256_cpasync", "64x256_splitk",
// "64x256_streamk", "128x256_streamk", "128x128_streamk".
const char* WgmmaTileName(WgmmaTile tile);
// Output rows and columns per tile.
int WgmmaTileM(WgmmaTile tile);
int WgmmaTileN(WgmmaTile tile);
// Splits K over a cluster (see k64x256SplitK); its rows of C depend on M.
bool WgmmaTileSplitsK(WgmmaTile tile);
// Stream-K: units of (tile, k-block) spread over the CTAs; needs workspace.
bool WgmmaTileStreamK(WgmmaTile tile);
// B through cp.async (any even N) rather than TMA (N % 8 == 0).
bool WgmmaTileCopiesB(WgmmaTile tile);

struct WgmmaGemmArgs {
  WgmmaDType dtype = WgmmaDType::kBF16;
  WgmmaTile tile = WgmmaTile::k128x256;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;  // device, M x K row-major
  const void* b = nullptr;  // device, K x N row-major
  void* c = nullptr;        // device, M x N row-major
  int num_sms = 0;          // persistent grid width; 0 = ask the current device
  // Device scratch of at least WgmmaWorkspaceBytes(*this) bytes, 16-byte
  // aligned (the stream-K tiles' f32 partials; contents undefined on entry).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// The most CTAs a stream-K launch uses (its flags are a fixed per-stream buffer).
inline constexpr int kWgmmaStreamKMaxCtas = 1024;

// Where each launch puts its work; see the file comment.
struct WgmmaGeometry {
  int tile_m = 0, tile_n = 0;  // output tile shape
  int tiles_m = 0, tiles_n = 0;
  int group_m = 0;             // tile rows walked together for L2 reuse
  int grid_x = 0;              // CTAs launched (1-D grid): clusters x splits
  int splits = 1;              // CTAs (a cluster) per tile, each a range of k-blocks
  int kb_per_split = 0;        // 64-deep k-blocks per rank when splits > 1
  int k_blocks = 0;            // 64-deep k-blocks per tile
  bool stream_k = false;       // grid_x CTAs share tiles() * k_blocks units
  int tiles() const { return tiles_m * tiles_n; }
  int64_t units() const { return int64_t{tiles()} * k_blocks; }
  // Stream-K: one f32 partial tile per CTA; else none.
  size_t workspace_bytes() const {
    return stream_k ? size_t(grid_x) * size_t(tile_m) * size_t(tile_n) * sizeof(float) : 0;
  }
};

WgmmaGeometry WgmmaLaunchGeometry(WgmmaTile tile, int64_t m, int64_t n, int64_t k, int num_sms);

// The scratch LaunchWgmmaGemm needs for `args` (0 for all but the stream-K
// tiles), with num_sms 0 meaning the current device's count, as the launch does.
size_t WgmmaWorkspaceBytes(const WgmmaGemmArgs& args);

// Tile `index` (0 <= index < tiles) -> (m tile, n tile). Shared by the kernel.
WGMMA_HOST_DEVICE inline void WgmmaTileAt(int index, int tiles_m, int tiles_n, int group_m,
                                          int* m_tile, int* n_tile) {
  const int per_group = group_m * tiles_n;
  const int group = index / per_group;
  const int first_m = group * group_m;
  const int rows = (tiles_m - first_m) < group_m ? (tiles_m - first_m) : group_m;
  const int r = index - group * per_group;
  *m_tile = first_m + r % rows;
  *n_tile = r / rows;
}

// ---------------------------------------------------------------- stream-K partition
// Shared by the kernel (producer and consumers) and the tests.

// The first unit of CTA `cta` of `ctas` over `units`: ranges balanced to within one unit.
WGMMA_HOST_DEVICE inline int WgmmaStreamKFirstUnit(int cta, int ctas, int units) {
  return static_cast<int>(static_cast<int64_t>(units) * cta / ctas);
}

// The CTA whose range holds `unit`: the largest c with FirstUnit(c) <= unit.
WGMMA_HOST_DEVICE inline int WgmmaStreamKCtaOf(int unit, int ctas, int units) {
  return static_cast<int>(((static_cast<int64_t>(unit) + 1) * ctas - 1) / units);
}

// k-blocks [kb_lo, kb_hi) of one tile, computed by one CTA in one go.
struct WgmmaSegment {
  int tile = 0;
  int kb_lo = 0, kb_hi = 0;
};

// One CTA's segments in the order it computes them: either whole tiles
// (first, first + step, ... below `tiles`, each k-blocks [kb_lo, kb_hi): the
// persistent and split tiles) or its stream-K unit range (unit u = tile *
// k_blocks + k-block).
class WgmmaSegmentWalk {
 public:
  WGMMA_HOST_DEVICE static WgmmaSegmentWalk Tiles(int first, int step, int tiles, int kb_lo,
                                                  int kb_hi) {
    WgmmaSegmentWalk w;
    w.next_ = first, w.end_ = tiles, w.step_ = step, w.kb_lo_ = kb_lo, w.kb_hi_ = kb_hi;
    return w;
  }
  WGMMA_HOST_DEVICE static WgmmaSegmentWalk StreamK(int cta, int ctas, int tiles, int k_blocks) {
    WgmmaSegmentWalk w;
    const int units = tiles * k_blocks;
    w.next_ = WgmmaStreamKFirstUnit(cta, ctas, units);
    w.end_ = WgmmaStreamKFirstUnit(cta + 1, ctas, units);
    w.step_ = 0;  // marks stream-K
    w.kb_hi_ = k_blocks;
    return w;
  }
  // The next segment into *s; false when the CTA is done.
  WGMMA_HOST_DEVICE bool Next(WgmmaSegment* s) {
    if (next_ >= end_) return false;
    if (step_ > 0) {
      *s = {next_, kb_lo_, kb_hi_};
      next_ += step_;
      return true;
    }
    const int k_blocks = kb_hi_;
    s->tile = next_ / k_blocks;
    s->kb_lo = next_ - s->tile * k_blocks;
    s->kb_hi = end_ - s->tile * k_blocks < k_blocks ? end_ - s->tile * k_blocks : k_blocks;
    next_ += s->kb_hi - s->kb_lo;
    return true;
  }

 private:
  int next_ = 0, end_ = 0, step_ = 0, kb_lo_ = 0, kb_hi_ = 0;
};

// nullptr when the kernel can run these args; else why not.
const char* WgmmaUnsupportedReason(const WgmmaGemmArgs& args);

// Enqueues C = A * B on `stream`. cudaErrorInvalidValue (nothing launched) for
// args WgmmaUnsupportedReason rejects; otherwise the launch's error.
cudaError_t LaunchWgmmaGemm(const WgmmaGemmArgs& args, cudaStream_t stream);

}  // namespace arbiter::wgmma
