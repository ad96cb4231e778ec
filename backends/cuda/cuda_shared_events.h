// Completion events shared with client processes (engine SharedEvents): a ring
// of interprocess events on the backend's device - cudaEventInterprocess |
// cudaEventDisableTiming, the only flags cudaIpcGetEventHandle accepts -
// each exported once as its 64-byte cudaIpcEventHandle_t. A client opens the
// handles once (cudaIpcOpenEventHandle) and waits on a slot each Matmul; the
// daemon records the slot on the dispatch's stream right after the kernel.
//
// Internal to backends/cuda. Not thread-safe per slot (SharedEvents).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter::cuda {

// `count` events on `device`, each with its handle.
absl::StatusOr<std::unique_ptr<SharedEvents>> CreateCudaSharedEvents(int device, size_t count);

}  // namespace arbiter::cuda
