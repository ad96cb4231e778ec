// Launcher of the skinny family: C[M, N] = A[M, K] B[K, N] for M in 1..32
// against a large weight B (decode and small-batch transformer GEMMs). There
// the work is bound by streaming B once from DRAM (1 x 4096 x 4096 bf16 moves
// 32 MiB for 33 MFLOP), so the kernel is built around the load stream:
// B fragments go from global memory into tensor-core registers with no
// re-layout, through a per-lane ring of cp.async copies in shared memory (3 to
// 8 k16 steps in flight per warp), K split across warps and CTAs until 3 CTAs
// per SM stream, and the split partial sums added in a fixed order (no
// atomics). Ragged N (any N, e.g. a vocabulary of 30522 or 32001) runs in the
// kernel with narrower copies (odd N: element loads); nothing is copied.
//
// sm_90+: the K splits of one column strip are the CTAs of a thread-block
// cluster and are added through distributed shared memory in the same kernel;
// where N is too narrow for clusters of 8 to fill the SMs, the splits go to
// workspace and a second kernel adds them. f16 and bf16 in, f32 accumulation
// (mma.sync m16n8k16), C in the input dtype.
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

// Past 32 rows every strip's CTA re-reads more of A than the B it streams
// (measured on the H200: 64 x 18176 x 4544 took 186 us, 3.4x cuBLAS), so the
// family stops there.
inline constexpr int64_t kSkinnyMaxM = 32;

// How one launch divides the work; a function of N, K and the SM count only
// (never of M), so a row of C is computed the same way whatever M is.
struct SkinnyPlan {
  int splits = 1;          // CTAs along K per column strip (grid.y)
  int64_t k_chunk = 0;     // K rows per warp slice (a multiple of 32)
  bool workspace = false;  // splits added by a second kernel (else in-cluster)
};
SkinnyPlan MakeSkinnyPlan(int64_t n, int64_t k, int sm_count);

// Scratch the launch needs: 0 unless the plan adds splits through workspace
// (splits * M * N floats).
size_t SkinnyWorkspaceBytes(const LaunchArgs& args);

// Enqueues the kernel(s) on `stream`. cudaErrorInvalidValue for a dtype other
// than f16/bf16, M outside [1, 32], N or K outside [1, 2^31), null operands or
// too little workspace; else the first launch error. Needs an sm_90+ device.
cudaError_t LaunchSkinny(const LaunchArgs& args, cudaStream_t stream);
inline constexpr Launcher kSkinny = {"LaunchSkinny", LaunchSkinny, SkinnyWorkspaceBytes};

// Accuracy budget (engine/contract.h's formula), shared by the contract, the
// tests and the bench.
inline constexpr double kSkinnyBudgetAbs = 1e-5;
inline constexpr double kSkinnyBudgetRel = 2e-6;

}  // namespace arbiter::kernels
