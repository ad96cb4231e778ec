// The CUDA backend: one device, used through its primary context, which this
// object owns for the daemon's lifetime. Buffers come from a device memory
// pool (no cudaMalloc per request); each Stream is a CUDA stream with pinned
// host staging for operand copies, its own cuBLAS handle and workspace bound to
// it, a cuBLASLt handle and workspace, device timing events and a scratch area
// (backends/cuda/cuda_resources.h is what kernel families see of it).
//
// Every CUDA and cuBLAS call is checked; a sticky device error (an illegal
// address, a kernel fault) is recorded and Health() reports it, so the daemon
// goes NOT_SERVING instead of serving results from a corrupted context.
//
// This header includes no CUDA header (the daemon includes it): the CUDA state
// lives behind a pointer to an implementation.
//
// Thread-safe: provides internal synchronization. Each Stream is used by one
// worker at a time; a Buffer must not be destroyed while work that uses it is
// still being enqueued, though work already enqueued on any of this backend's
// streams is waited for before its memory is reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/status.h"

namespace arbiter::cuda {

struct CudaBackendOptions {
  int device = 0;                                  // CUDA device ordinal
  uint64_t pool_release_threshold = 8ull << 30;    // bytes the memory pool keeps cached when idle
  size_t cublas_workspace_bytes = 32ull << 20;     // per-stream cublasGemmEx workspace
  size_t lt_workspace_bytes = 64ull << 20;         // per-stream cublasLtMatmul workspace
  size_t staging_bytes = 8ull << 20;               // per-stream pinned host staging: two halves a copy's chunks alternate in
  int packing_threads = 4;                         // per-stream threads packing a chunk into staging, the caller's included
  size_t launch_graphs = 64;                       // per-stream CUDA graphs of repeated dispatches replayed (engine/launch_recordings.h); 0: none
};

class CudaBackend final : public arbiter::Backend {
 public:
  // Number of CUDA devices this process can use; 0 when there is no driver or
  // no GPU (never aborts).
  static int VisibleDevices();
  // The ordinal of the visible device whose UUID is `uuid` ("GPU-..."); NOT_FOUND
  // naming the visible devices' UUIDs when none is.
  static absl::StatusOr<int> FindDevice(const std::string& uuid);

  // Opens `options.device` (its primary context), reads its fingerprint and
  // creates the memory pool. UNAVAILABLE when there is no such device.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);

  // The architecture rule, as a pure function of the compute capability (90 for
  // sm_90): "sm_80+" admits cc >= 80; "sm_90a" and "sm_90" admit cc == 90 only;
  // "cpu" never; anything else is refused with the reason.
  static std::string ArchitectureGapFor(const std::string& claim, int compute_capability);
  // The kernel driver's version ("580.159.04") from the text of /proc/driver/nvidia/version;
  // empty when the text has none. Pure, so it is tested without a GPU.
  static std::string KernelDriverVersion(const std::string& proc_text);

  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const DeviceInfo& info() const override;
  std::string ArchitectureGap(const std::string& claim) const override;
  absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  absl::Status Health() const override;
  // Client GPU memory (CUDA VMM fds, legacy IPC handles) and client host memory
  // (sealed memfds, page-locked here, copied over the bus): cuda_regions.h.
  std::vector<RegionKind> RegionKinds() const override {
    // Device memory first: a client taking the first kind it can make gets zero copies.
    return {RegionKind::kCudaVmmFd, RegionKind::kCudaIpc, RegionKind::kHostMemfd};
  }
  absl::StatusOr<std::unique_ptr<Buffer>> MapRegion(const RegionSource& source) override;
  // Interprocess events for completion by event (cuda_shared_events.h).
  absl::StatusOr<std::unique_ptr<SharedEvents>> CreateSharedEvents(size_t count) override;
  // Through NVML (nvml_clock.h); nullopt where libnvidia-ml.so.1 is not there.
  std::optional<double> SmClockMhz() const override;
  // cudaHostAlloc'd (page-locked, portable) memory: the streams' copies to and
  // from it go by DMA alone, without staging. Allocation makes this backend's
  // device current on the calling thread; null on failure.
  HostAllocator host_allocator() const override;

  const CudaBackendOptions& options() const;

 private:
  struct Impl;  // the CUDA state; defined in cuda_backend.cc
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace arbiter::cuda
