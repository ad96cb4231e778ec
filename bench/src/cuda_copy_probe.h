// Device copy bandwidth on the GPU: cudaMemcpyAsync device to device, timed by
// CUDA events. Built only with the CUDA backend.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/status.h"

namespace arbiter::bench {

// Seconds of each of `repeats` copies of `bytes` (after one untimed copy).
absl::StatusOr<std::vector<double>> CudaCopySeconds(size_t bytes, int repeats);

}  // namespace arbiter::bench
