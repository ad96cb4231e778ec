// Client GPU memory the CUDA backend maps for zero-copy operands, both ways a
// process can share device memory:
//   - CUDA VMM (RegionKind::kCudaVmmFd): the client's cuMemCreate allocation,
//     exported as a POSIX file descriptor (cuMemExportToShareableHandle) and
//     passed over the fd socket; imported here (cuMemImportFromShareableHandle),
//     mapped into a reserved address range and made read-write for this device.
//   - legacy IPC (RegionKind::kCudaIpc): a cudaIpcMemHandle_t of a whole
//     cudaMalloc allocation, opened with cudaIpcOpenMemHandle. CUDA lets a
//     process open a handle once, so opened handles are shared by every region
//     that names them (reference-counted) and closed with the last one.
// Either way the memory must be on this daemon's device and hold the
// registered bytes; both are checked before the region exists.
//
// Host memory too (RegionKind::kHostMemfd): the client's sealed memfd, mapped
// shared (engine/host_region.h) and page-locked (cudaHostRegister). It is
// host_side(): a dispatch copies A and B from it to the device and C back by
// DMA - no socket, no staging - for clients whose operands live on the host.
//
// The driver API calls go through cudaGetDriverEntryPointByVersion, so arbiterd
// does not link libcuda (it starts on machines without a driver, CPU backend).
//
// Internal to backends/cuda. Thread-safe: the handle cache has its own mutex;
// each returned Buffer has one owner.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter::cuda {

absl::StatusOr<std::unique_ptr<Buffer>> MapVmmFd(int device, int fd, size_t bytes);
absl::StatusOr<std::unique_ptr<Buffer>> MapIpcHandle(int device, const std::string& handle,
                                                     size_t bytes);
absl::StatusOr<std::unique_ptr<Buffer>> MapHostMemfd(int device, int fd, size_t bytes);

}  // namespace arbiter::cuda
