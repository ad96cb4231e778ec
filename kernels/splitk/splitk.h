// Launcher of the splitk family, for small M*N with large K (16x16x65536 takes
// cuBLAS ~19 us against a ~1 us floor): K is split across CTAs so that a small C
// still fills the device. sm_80+; f16 and bf16 in, f32 accumulation, C in the
// input dtype; any M, N, K. Two variants:
//  - splitk: each split writes its f32 partial tile to scratch; a second kernel
//    sums the partials in split order (run-to-run deterministic).
//  - splitk_atomic: each split atomically adds into one f32 scratch matrix, then
//    a kernel converts it to C (nondeterministic: float addition order varies).
// The split count aims to fill args.sm_count multiprocessors.
// Plain C++ header: no device code, no absl.
#pragma once

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

// LaunchSplitK and LaunchSplitKAtomic. Workspace: splits * M * N floats
// (M * N for the atomic variant), plus zero-padded copies of A and B when they
// are not 16-byte loadable as given (K or N not a multiple of 8, or unaligned
// pointers). cudaErrorInvalidValue for a dtype other than f16/bf16, dims outside
// [1, 2^31) or too little workspace; otherwise the first launch error.
extern const Launcher kSplitK;
extern const Launcher kSplitKAtomic;

// Accuracy budget (engine/contract.h's formula) of both variants, shared by the
// contracts, the tests and bench/kernels.
inline constexpr double kSplitKBudgetAbs = 1e-5;
inline constexpr double kSplitKBudgetRel = 2e-6;

}  // namespace arbiter::kernels
