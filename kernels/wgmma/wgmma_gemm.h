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
// Determinism: one CTA owns each C tile and walks K in a fixed order with no
// atomics, so the output is bitwise run-to-run deterministic; for a fixed tile
// config a row of C does not depend on M (rows past M are zero-filled by TMA
// and never stored).
//
// Needs: K % 8 == 0 and N % 8 == 0 (TMA wants 16-byte row strides) and
// 16-byte-aligned A, B and C; any M. The CpAsync tiles need only an even N
// and 4-byte-aligned B and C (A still goes through TMA). Callers check
// WgmmaUnsupportedReason first.
//
// Plain C++ API (no absl): usable from .cc files compiled by the host compiler.
#pragma once

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
};

inline constexpr WgmmaTile kAllWgmmaTiles[] = {
    WgmmaTile::k128x128,        WgmmaTile::k128x256,        WgmmaTile::k128x128CpAsync,
    WgmmaTile::k128x256CpAsync, WgmmaTile::k64x256SplitK};

// "128x128", "128x256", "128x128_cpasync", "128x256_cpasync", "64x256_splitk".
const char* WgmmaTileName(WgmmaTile tile);
// Output rows and columns per tile.
int WgmmaTileM(WgmmaTile tile);
int WgmmaTileN(WgmmaTile tile);
// Splits K over a cluster (see k64x256SplitK); its rows of C depend on M.
bool WgmmaTileSplitsK(WgmmaTile tile);
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
};

// Where each launch puts its work; see the file comment.
struct WgmmaGeometry {
  int tile_m = 0, tile_n = 0;  // output tile shape
  int tiles_m = 0, tiles_n = 0;
  int group_m = 0;             // tile rows walked together for L2 reuse
  int grid_x = 0;              // CTAs launched (1-D grid): clusters x splits
  int splits = 1;              // CTAs (a cluster) per tile, each a range of k-blocks
  int kb_per_split = 0;        // 64-deep k-blocks per rank when splits > 1
  int tiles() const { return tiles_m * tiles_n; }
};

WgmmaGeometry WgmmaLaunchGeometry(WgmmaTile tile, int64_t m, int64_t n, int64_t k, int num_sms);

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

// nullptr when the kernel can run these args; else why not.
const char* WgmmaUnsupportedReason(const WgmmaGemmArgs& args);

// Enqueues C = A * B on `stream`. cudaErrorInvalidValue (nothing launched) for
// args WgmmaUnsupportedReason rejects; otherwise the launch's error.
cudaError_t LaunchWgmmaGemm(const WgmmaGemmArgs& args, cudaStream_t stream);

}  // namespace arbiter::wgmma
