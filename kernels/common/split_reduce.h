// The second pass of the families that split K across CTAs (splitk, gemv): each
// split wrote its f32 partial of C to its own slab of scratch, [split][M][N];
// this adds the slabs of every element in split order and rounds to C's dtype.
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "engine/dtype.h"

namespace arbiter::kernels {

// c[i] = round(partials[0*mn + i] + partials[1*mn + i] + ... ) for i < mn, the
// slabs added in split order whatever the grid, so the result is bitwise
// run-to-run deterministic and depends on nothing but the split count. One
// split just converts. Launch geometry: 1-D, grid.x walks the mn elements of C
// in row-major order, 256 per block, grid-stride beyond the block cap; from 32
// splits up, a warp per element (8 per block): lane l adds splits l, l + 32, ...
// in order, then a fixed xor-shuffle tree adds the lanes, so 32 loads are in
// flight instead of one.
// cudaErrorInvalidValue for a dtype other than f16/bf16; else the launch's error.
cudaError_t LaunchSplitReduce(DType dtype, const float* partials, int64_t mn, int splits, void* c,
                              cudaStream_t stream);

}  // namespace arbiter::kernels
