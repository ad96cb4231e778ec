// Launcher of the gemv family, for M in 1..16 (cuBLAS takes ~23 us for
// 1x4096x4096 against a ~8 us bandwidth floor): bandwidth-bound, each block
// streams a strip of B columns with 16-byte loads and keeps every row of C for
// them in f32 registers; K is split across blocks (f32 partials in scratch,
// added in a fixed order) when N alone gives too few blocks. Any arch (plain
// FFMA); f16 and bf16 in, f32 accumulation, C in the input dtype; M <= 16, any
// N and K (16-byte loads when N % 8 == 0, K % 8 == 0 and A, B are aligned;
// element loads otherwise). The K split count aims to fill args.sm_count
// multiprocessors.
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstdint>

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

inline constexpr int64_t kGemvMaxM = 16;

// LaunchGemv. Workspace: 0 without a K split, else splits * M * N floats.
// cudaErrorInvalidValue for a dtype other than f16/bf16, M outside [1, 16],
// N, K outside [1, 2^31) or too little workspace; else the first launch error.
extern const Launcher kGemv;

// Accuracy budget (engine/contract.h's formula), shared by the contract, the
// tests and bench/kernels.
inline constexpr double kGemvBudgetAbs = 1e-5;
inline constexpr double kGemvBudgetRel = 2e-6;

}  // namespace arbiter::kernels
