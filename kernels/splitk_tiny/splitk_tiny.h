// Launcher of splitk_tiny, for a tiny C against a long K (16 x 16 x 65536 moves
// 4 MiB, about 1 us at the H200's copy bandwidth, yet every two-launch split-K
// takes 10-12 us): ONE launch, K split over up to sm_count CTAs, and the
// partials added in a fixed order inside that launch - in rank order through
// distributed shared memory within each thread-block cluster, then, across
// clusters, by whichever cluster arrives last (one acquire-release ticket), in
// cluster order. So C is
// bitwise run-to-run deterministic on one device. f16 and bf16 in, f32
// accumulation, C in the input dtype; M <= 64, N <= 64 (any N), K % 8 == 0,
// A and B 16-byte aligned. sm_90 (clusters).
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

// The whole C is one CTA tile of 16-row by 8-column mma fragments; past 64 x 64
// its accumulators would not fit a thread's registers beside the fragments.
inline constexpr int64_t kSplitKTinyMaxM = 64;
inline constexpr int64_t kSplitKTinyMaxN = 64;
// A row of A is copied 16 bytes at a time from each K slice's start.
inline constexpr int64_t kSplitKTinyAlignK = 8;
// What the registry races (kernels/splitk_tiny/splitk_tiny_candidate.cc), from
// the H200 runs in bench/results/splitk-tiny-h200.md: this kernel (run 3's
// `no warm-up` row, events after a read flush) at 16 x 16 x 65536 took 8.58 us,
// 1.18x cublasGemmEx (10.11 us) and the fastest candidate; at 16 x 16 x 32776
// 7.94 us, 1.10x. At 16 x 64 x 16384 and 64 x 64 x 8192 it ran at 0.77-0.87x
// of cuBLAS's time (runs 1 and 3, the latter with the since-removed warm-up),
// so wider C is not raced (the kernel still takes it).
inline constexpr int64_t kSplitKTinyRacedMaxM = 16;
inline constexpr int64_t kSplitKTinyRacedMaxN = 16;
inline constexpr int64_t kSplitKTinyRacedMinK = 32768;

// The largest thread-block cluster a plan uses (the portable size).
inline constexpr int kSplitKTinyMaxCluster = 8;

// How one launch divides K: a function of K, the SM count and the cluster cap
// only (the launcher uses the cap kSplitKTinyMaxCluster; the bench and tests
// ask for smaller clusters).
struct SplitKTinyPlan {
  int ctas = 1;         // grid.x: K slices, a multiple of `cluster`
  int cluster = 1;      // CTAs per thread-block cluster: 1, 2, 4 or 8
  int64_t k_slice = 0;  // K rows per CTA, a multiple of 16; trailing CTAs may get none
  int clusters() const { return ctas / cluster; }
};
SplitKTinyPlan MakeSplitKTinyPlan(int64_t k, int sm_count, int max_cluster = kSplitKTinyMaxCluster);

// Why the kernel cannot run these arguments (nullptr: it can): dtype, M, N,
// K % 8 or an operand not 16-byte aligned.
const char* SplitKTinyUnsupported(const LaunchArgs& args);

// Workspace: one f32 partial C tile per cluster when the plan has more than one
// cluster, else 0. The clusters' arrival counters are not in it: they live in
// a small per-stream buffer the launcher allocates (and zeroes) at a stream's
// first launch, which every launch leaves at zero for the next.
size_t SplitKTinyWorkspaceBytes(const LaunchArgs& args);
size_t SplitKTinyWorkspaceBytes(const LaunchArgs& args, const SplitKTinyPlan& plan);

// Enqueues the kernel. cudaErrorInvalidValue (nothing launched) where
// SplitKTinyUnsupported says why, for dims outside [1, 2^31) or too little
// workspace; cudaErrorStreamCaptureUnsupported at a stream's first launch if it
// is capturing (its counters must be zeroed outside a graph); else the first
// launch error.
cudaError_t LaunchSplitKTiny(const LaunchArgs& args, cudaStream_t stream);
// The same with a given plan (one of MakeSplitKTinyPlan's for this K; else
// cudaErrorInvalidValue): for the bench and the tests.
cudaError_t LaunchSplitKTiny(const LaunchArgs& args, const SplitKTinyPlan& plan, cudaStream_t stream);

extern const Launcher kSplitKTiny;

// Bench only (bench/splitk_tiny's breakdown of where the time goes; bf16 with
// M, N <= 16, else cudaErrorInvalidValue): the launcher's kernel cut short
// after the CTA's own sum (loads and mma included) or after the cluster sum
// (written to the slabs). Neither writes C: not a GEMM, never registered.
enum class SplitKTinyProbe { kStopAfterCtaSum, kStopAfterClusterSum };
cudaError_t LaunchSplitKTinyProbe(const LaunchArgs& args, SplitKTinyProbe probe, cudaStream_t stream);

// Accuracy budget (engine/contract.h's formula): f32 accumulation in 16-wide
// tensor-core steps, slices added in f32, as splitk.
inline constexpr double kSplitKTinyBudgetAbs = 1e-5;
inline constexpr double kSplitKTinyBudgetRel = 2e-6;

}  // namespace arbiter::kernels
