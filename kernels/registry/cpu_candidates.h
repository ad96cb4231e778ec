// The candidates the CPU backend serves with: cpu_reference (tier 1),
// cpu_blocked (tier 2) and openblas (tier 3, f32/f64 only). Part of the
// registry, the one place above the runtime and the kernels that lists what a
// daemon serves.
#pragma once

#include <vector>

#include "engine/candidate.h"

namespace arbiter {

// threads: cpu_blocked's thread count, normally CpuBackend::threads();
// 0 = std::thread::hardware_concurrency(). (OpenBLAS's count is pinned by
// CpuBackend::Create.)
std::vector<CandidateSpec> CpuCandidates(int threads = 0);

}  // namespace arbiter
