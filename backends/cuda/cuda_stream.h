// One worker's CUDA stream: the engine Stream over a cudaStream_t, with the
// per-stream resources kernel families use (cuda_resources.h): a cuBLAS handle
// bound to the stream with its own workspace (cuBLAS repeats its results
// bitwise only with a fixed workspace per stream), a cuBLASLt handle and
// workspace, and a scratch area. Copies from or to pageable host memory go
// through pinned host staging in double-buffered chunks of at most 4 MiB,
// each packed by the stream's packing threads (host_gather.h says why several);
// copies to page-locked host memory (Backend::host_allocator's) go by DMA
// alone. The device timer is a pair of CUDA events around the enqueued kernel
// alone.
//
// Internal to backends/cuda (includes CUDA headers). Not thread-safe: one
// worker uses a stream at a time. Each call makes the stream's device current
// on the calling thread, so a KernelFn launched after it targets the right device.
#pragma once

#include <cstddef>
#include <memory>

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_resources.h"
#include "backends/cuda/device_pool.h"
#include "engine/backend.h"
#include "base/fork_join_pool.h"
#include "engine/host_gather.h"
#include "engine/launch_recordings.h"

namespace arbiter::cuda {

class CudaStream final : public Stream {
 public:
  static absl::StatusOr<std::unique_ptr<CudaStream>> Create(std::shared_ptr<DevicePool> pool,
                                                           const cudaDeviceProp& props,
                                                           const CudaBackendOptions& options);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  absl::Status CopyToDevice(Buffer& dst, const void* src, size_t bytes) override;
  // Packs the pieces into the pinned halves: one copy per half, however small the pieces.
  absl::Status GatherToDevice(Buffer& dst, absl::Span<const HostPiece> pieces) override;
  // Straight from the page-locked source on the stream, no staging, no wait.
  absl::Status CopyFromHostSide(Buffer& dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* dst, const Buffer& src, size_t bytes) override;
  absl::Status Poison(Buffer& buf, DType dtype, size_t count) override;
  absl::Status FlushCache() override;
  absl::Status TimerStart() override;
  absl::Status TimerStop() override;
  absl::StatusOr<double> ElapsedSeconds() override;
  absl::Status Synchronize() override;
  // Replays a CUDA graph of the work once the key comes a second time
  // (engine/launch_recordings.h), while the stream's scratch is the one it
  // was recorded with; launches as it is with launch_graphs = 0.
  absl::Status Launch(const LaunchKey& key, absl::FunctionRef<absl::Status()> launch) override;
  bool Replays(const LaunchKey& key) const override;
  // A one-thread kernel spinning on a word of mapped page-locked memory that
  // ReleaseLaunches writes; it gives up after kHoldLimitNs.
  absl::Status HoldLaunches() override;
  absl::Status ReleaseLaunches() override;
  bool LastHoldExpired() override;
  absl::Status Reference(const Problem& p, const Buffer& a, const Buffer& b,
                         std::vector<double>* c) override;
  // Opens the cudaIpcEventHandle_t, makes the stream wait on it, and closes it
  // (the wait stays enqueued).
  absl::Status WaitSharedEvent(std::string_view handle) override;
  // The measurer's checks on the device: only the sampled rows, or a count, come back.
  absl::Status ReferenceRows(const Problem& p, const Buffer& a, const Buffer& b,
                             const std::vector<int64_t>& rows, std::vector<double>* c) override;
  absl::Status CopyRowsToHost(void* dst, const Buffer& src, size_t row_bytes,
                              const std::vector<int64_t>& rows) override;
  absl::StatusOr<int64_t> CountNonFinite(const Buffer& buf, DType dtype, size_t count) override;
  absl::StatusOr<int64_t> CountDifferences(const Buffer& x, const Buffer& y, DType dtype,
                                           size_t count) override;
  // Past the table size, on the device from a copy of the host's table: the
  // operands of a bucket never cross the bus.
  absl::Status FillRandom(Buffer& buf, DType dtype, size_t count, uint64_t seed) override;

  const StreamResources& resources() const { return res_; }
  // Refused while a launch is being recorded: a graph must not allocate, and the
  // first launch of every key (never recorded) has grown it already.
  absl::StatusOr<void*> Scratch(size_t bytes);
  size_t scratch_bytes() const { return scratch_ == nullptr ? 0 : scratch_->bytes(); }
  // How this stream's launches went (null without launch graphs).
  const LaunchRecordings* recordings() const { return recordings_.get(); }

 private:
  CudaStream(std::shared_ptr<DevicePool> pool, const cudaDeviceProp& props);
  absl::Status Init(const CudaBackendOptions& options);
  absl::Status Use() const;  // makes the device current on this thread
  absl::Status CopyToHostRaw(void* dst, const void* src, size_t bytes);
  // The timer's events: recorded by the graph too while a launch is recorded.
  cudaError_t RecordEvent(cudaEvent_t event);
  // Stages `gather`'s bytes a chunk at a time to `to` on the device.
  absl::Status StageToDevice(const HostGather& gather, char* to);
  // Zeroes the device counter, enqueues `launch(counter)` and reads the counter back.
  template <typename Enqueue>
  absl::StatusOr<int64_t> Count(Enqueue launch);

  std::shared_ptr<DevicePool> pool_;
  cudaDeviceProp props_;
  StreamResources res_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;  // the device timer
  bool timer_started_ = false, timer_stopped_ = false;
  void* staging_ = nullptr;                       // pinned host, two halves
  size_t staging_half_ = 0;
  size_t chunk_ = 0;                              // one copy's bytes: min(half, kCopyChunkBytes)
  cudaEvent_t staged_[2] = {nullptr, nullptr};    // a half's copy has completed
  std::unique_ptr<ForkJoinPool> packers_;         // fill a half with a chunk
  std::unique_ptr<Buffer> cublas_workspace_;
  std::unique_ptr<Buffer> lt_workspace_;
  std::unique_ptr<Buffer> scratch_;
  std::unique_ptr<Buffer> flush_;                 // 2x L2 (and a sink), read to evict it
  std::unique_ptr<Buffer> counter_;               // one unsigned long long the counts add to
  std::unique_ptr<Buffer> fill_table_;            // FillRandom's table on the device
  // Mapped page-locked words: [0] the generation ReleaseLaunches opened, [1] the
  // generation whose hold expired first.
  unsigned* hold_words_ = nullptr;
  unsigned hold_generation_ = 0;
  bool holding_ = false;
  unsigned* hold_device_words_ = nullptr;         // hold_words_ as the device sees them

  // Stream capture into a CUDA graph, instantiated: LaunchRecordings' recorder.
  class GraphRecorder final : public LaunchRecorder {
   public:
    explicit GraphRecorder(CudaStream& stream) : stream_(stream) {}
    absl::StatusOr<void*> Record(absl::FunctionRef<absl::Status()> launch) override;
    absl::Status Replay(void* recording) override;
    void Destroy(void* recording) override;

   private:
    CudaStream& stream_;
  };
  GraphRecorder recorder_{*this};
  std::unique_ptr<LaunchRecordings> recordings_;  // null: launch_graphs = 0
  uint64_t scratch_generation_ = 0;               // moves whenever scratch_ is reallocated
  bool recording_ = false;                        // a launch is being captured
};

}  // namespace arbiter::cuda
