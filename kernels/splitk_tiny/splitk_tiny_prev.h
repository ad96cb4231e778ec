// splitk_tiny as it was at 6d90a6a (kernels/splitk_tiny/splitk_tiny_prev.cu),
// for bench/splitk_tiny's side-by-side timing only: not registered. Takes what
// splitk_tiny takes (SplitKTinyUnsupported), with its own workspace size.
// Plain C++ header: no device code, no absl.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

size_t SplitKTinyPrevWorkspaceBytes(const LaunchArgs& args);
cudaError_t LaunchSplitKTinyPrev(const LaunchArgs& args, cudaStream_t stream);
extern const Launcher kSplitKTinyPrev;

}  // namespace arbiter::kernels
