#include "backends/cuda/cuda_stream.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_kernels.h"
#include "engine/random_fill.h"

namespace arbiter::cuda {
namespace {

uint64_t NanBits(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 0x7fc00000u;
    case DType::kF64: return 0x7ff8000000000000ull;
    case DType::kF16: return 0x7e00u;
    case DType::kBF16: return 0x7fc0u;
  }
  return 0;
}

DeviceElem ElemOf(DType dtype) {
  switch (dtype) {
    case DType::kF32: return DeviceElem::kF32;
    case DType::kF64: return DeviceElem::kF64;
    case DType::kF16: return DeviceElem::kF16;
    case DType::kBF16: return DeviceElem::kBF16;
  }
  return DeviceElem::kF32;
}

// The most one staged copy moves. The host packs one chunk while the device
// copies the previous one, so all but the last chunk's DMA hides behind the
// packing: ~0.1 ms of DMA at PCIe 5 rates, where a 32 MiB half (a 4096^2 bf16
// operand whole) would add ~1 ms after the packing ends.
constexpr size_t kCopyChunkBytes = 4 << 20;

// Whether `p` is page-locked host memory the device can DMA to directly.
bool PageLocked(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // not an error worth keeping: p is just not CUDA's
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

absl::Status CheckFits(const char* what, size_t bytes, const Buffer& buf) {
  if (bytes <= buf.bytes()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": ", bytes, " bytes requested, buffer holds ", buf.bytes()));
}

}  // namespace

CudaStream::CudaStream(std::shared_ptr<DevicePool> pool, const cudaDeviceProp& props)
    : pool_(std::move(pool)), props_(props) {
  res_.props = &props_;
}

absl::StatusOr<std::unique_ptr<CudaStream>> CudaStream::Create(std::shared_ptr<DevicePool> pool,
                                                              const cudaDeviceProp& props,
                                                              const CudaBackendOptions& options) {
  std::unique_ptr<CudaStream> s(new CudaStream(std::move(pool), props));
  RETURN_IF_ERROR(s->Init(options));
  return s;
}

absl::Status CudaStream::Init(const CudaBackendOptions& options) {
  RETURN_IF_ERROR(Use());
  // Non-blocking: no implicit ordering with the legacy default stream or with
  // other workers; the pool orders frees explicitly.
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&res_.stream, cudaStreamNonBlocking));
  pool_->AddStream(res_.stream);
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop_));
  for (cudaEvent_t& e : staged_) {
    CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  staging_half_ = std::max<size_t>(options.staging_bytes / 2, 1 << 20);
  chunk_ = std::min(staging_half_, kCopyChunkBytes);
  CUDA_RETURN_IF_ERROR(cudaMallocHost(&staging_, 2 * staging_half_));
  packers_ = std::make_unique<ForkJoinPool>(options.packing_threads);

  CUBLAS_RETURN_IF_ERROR(cublasCreate(&res_.cublas));
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(res_.cublas, res_.stream));
  ASSIGN_OR_RETURN(cublas_workspace_, pool_->Allocate(options.cublas_workspace_bytes));
  CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(res_.cublas, cublas_workspace_->data(),
                                            cublas_workspace_->bytes()));
  CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&res_.cublas_lt));
  ASSIGN_OR_RETURN(lt_workspace_, pool_->Allocate(options.lt_workspace_bytes));
  res_.lt_workspace = lt_workspace_->data();
  res_.lt_workspace_bytes = lt_workspace_->bytes();
  if (options.launch_graphs > 0) {
    recordings_ = std::make_unique<LaunchRecordings>(recorder_, options.launch_graphs);
  }
  return absl::OkStatus();
}

CudaStream::~CudaStream() {
  cudaSetDevice(pool_->device());
  if (holding_) ReleaseLaunches().IgnoreError();  // the held work runs before the stream goes
  recordings_.reset();  // the graphs go before what they name
  if (res_.stream != nullptr) {
    cudaStreamSynchronize(res_.stream);
    pool_->RemoveStream(res_.stream);
  }
  // Buffers go back to the pool before the stream they may be used on is destroyed.
  scratch_.reset();
  flush_.reset();
  counter_.reset();
  fill_table_.reset();
  if (res_.cublas_lt != nullptr) cublasLtDestroy(res_.cublas_lt);
  if (res_.cublas != nullptr) cublasDestroy(res_.cublas);
  lt_workspace_.reset();
  cublas_workspace_.reset();
  if (staging_ != nullptr) cudaFreeHost(staging_);
  if (hold_words_ != nullptr) cudaFreeHost(hold_words_);
  for (cudaEvent_t e : staged_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (stop_ != nullptr) cudaEventDestroy(stop_);
  if (res_.stream != nullptr) cudaStreamDestroy(res_.stream);
}

absl::Status CudaStream::Use() const {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(pool_->device()));
  return absl::OkStatus();
}

absl::Status CudaStream::CopyToDevice(Buffer& dst, const void* src, size_t bytes) {
  RETURN_IF_ERROR(CheckFits("CopyToDevice", bytes, dst));
  const HostPiece whole{src, bytes};
  return StageToDevice(HostGather(absl::MakeConstSpan(&whole, 1)), static_cast<char*>(dst.data()));
}

absl::Status CudaStream::GatherToDevice(Buffer& dst, absl::Span<const HostPiece> pieces) {
  // A gRPC message arrives in pieces of a frame or so (16 KiB by default): they are
  // packed into a chunk of the pinned staging, so the copies' fixed cost is paid per chunk.
  const HostGather gather(pieces);
  RETURN_IF_ERROR(CheckFits("GatherToDevice", gather.bytes(), dst));
  return StageToDevice(gather, static_cast<char*>(dst.data()));
}

absl::Status CudaStream::CopyFromHostSide(Buffer& dst, const void* src, size_t bytes) {
  RETURN_IF_ERROR(CheckFits("CopyFromHostSide", bytes, dst));
  RETURN_IF_ERROR(Use());
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst.data(), src, bytes, cudaMemcpyHostToDevice, res_.stream));
  return absl::OkStatus();
}

absl::Status CudaStream::StageToDevice(const HostGather& gather, char* to) {
  RETURN_IF_ERROR(Use());
  // Double-buffered: the host packs one pinned half while the other is in flight.
  int half = 0;
  for (size_t off = 0; off < gather.bytes(); off += chunk_, half ^= 1) {
    const size_t n = std::min(chunk_, gather.bytes() - off);
    char* stage = static_cast<char*>(staging_) + half * staging_half_;
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staged_[half]));  // the half is free again
    gather.Copy(off, n, stage, packers_.get());
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to + off, stage, n, cudaMemcpyHostToDevice, res_.stream));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(staged_[half], res_.stream));
  }
  return absl::OkStatus();
}

absl::Status CudaStream::CopyToHostRaw(void* dst, const void* src, size_t bytes) {
  RETURN_IF_ERROR(Use());
  if (bytes > 0 && PageLocked(dst)) {
    // The device writes it directly: no staging, no copy on the host.
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, res_.stream));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(res_.stream));
    return absl::OkStatus();
  }
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  auto issue = [&](size_t off, int half) -> absl::Status {
    const size_t n = std::min(chunk_, bytes - off);
    char* stage = static_cast<char*>(staging_) + half * staging_half_;
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(stage, from + off, n, cudaMemcpyDeviceToHost, res_.stream));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(staged_[half], res_.stream));
    return absl::OkStatus();
  };
  // Earlier CopyToDevice chunks may still read the staging halves.
  for (cudaEvent_t e : staged_) CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e));
  if (bytes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(issue(0, 0));
  int half = 0;
  for (size_t off = 0; off < bytes; off += chunk_, half ^= 1) {
    // The next chunk lands in the other half while this one is copied out.
    if (off + chunk_ < bytes) RETURN_IF_ERROR(issue(off + chunk_, half ^ 1));
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staged_[half]));
    std::memcpy(to + off, static_cast<char*>(staging_) + half * staging_half_,
                std::min(chunk_, bytes - off));
  }
  return absl::OkStatus();
}

absl::Status CudaStream::CopyToHost(void* dst, const Buffer& src, size_t bytes) {
  RETURN_IF_ERROR(CheckFits("CopyToHost", bytes, src));
  return CopyToHostRaw(dst, const_cast<Buffer&>(src).data(), bytes);
}

absl::Status CudaStream::Poison(Buffer& buf, DType dtype, size_t count) {
  RETURN_IF_ERROR(CheckFits("Poison", count * ElementSize(dtype), buf));
  RETURN_IF_ERROR(Use());
  CUDA_RETURN_IF_ERROR(LaunchFill(buf.data(), static_cast<int>(ElementSize(dtype)), NanBits(dtype),
                                  count, res_.stream));
  return absl::OkStatus();
}

absl::Status CudaStream::FlushCache() {
  RETURN_IF_ERROR(Use());
  // Reading twice the L2 through it evicts every line the operands left there
  // and leaves clean lines only. A memset (the flush until session 10) left the
  // L2 full of dirty lines, which the timed kernel then paid to write back while
  // it streamed its operands - tens of MB of writes that serving does not put
  // before a GEMM (its weights are read, not written) and that moved the ranks
  // of bandwidth-bound kernels on the H200 (README, "Selection").
  const size_t bytes = 2 * static_cast<size_t>(std::max(props_.l2CacheSize, 1 << 20));
  constexpr size_t kSink = 256;  // past the flushed bytes: the read pass's sink
  if (flush_ == nullptr) {
    if (holding_) {
      // Its first allocation may wait for the device, which waits for the release.
      return absl::FailedPreconditionError(
          "FlushCache: the flush buffer is allocated by a first FlushCache outside a launch hold");
    }
    ASSIGN_OR_RETURN(flush_, pool_->Allocate(bytes + kSink));
    // Zeros once (the xor the read pass takes is then 0, never kNever); the
    // dirty lines this leaves are written back by the first read pass.
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flush_->data(), 0, bytes + kSink, res_.stream));
  }
  constexpr unsigned kNever = 0x9e3779b9u;
  auto* base = static_cast<unsigned char*>(flush_->data());
  CUDA_RETURN_IF_ERROR(LaunchReadFlush(base, bytes, kNever,
                                       reinterpret_cast<unsigned*>(base + bytes),
                                       4 * std::max(props_.multiProcessorCount, 1), res_.stream));
  return absl::OkStatus();
}

cudaError_t CudaStream::RecordEvent(cudaEvent_t event) {
  // Captured into a graph, a plain record only orders the capture; an external
  // one becomes a node that records the event each time the graph runs.
  return recording_ ? cudaEventRecordWithFlags(event, res_.stream, cudaEventRecordExternal)
                    : cudaEventRecord(event, res_.stream);
}

absl::Status CudaStream::TimerStart() {
  RETURN_IF_ERROR(Use());
  CUDA_RETURN_IF_ERROR(RecordEvent(start_));
  timer_started_ = true;
  timer_stopped_ = false;
  return absl::OkStatus();
}

absl::Status CudaStream::TimerStop() {
  if (!timer_started_) return absl::FailedPreconditionError("TimerStop without TimerStart");
  RETURN_IF_ERROR(Use());
  CUDA_RETURN_IF_ERROR(RecordEvent(stop_));
  timer_stopped_ = true;
  return absl::OkStatus();
}

absl::StatusOr<double> CudaStream::ElapsedSeconds() {
  if (!timer_stopped_) return absl::FailedPreconditionError("ElapsedSeconds without TimerStop");
  RETURN_IF_ERROR(Use());
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_));
  float ms = 0;
  CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, stop_));
  return ms * 1e-3;
}

absl::Status CudaStream::Synchronize() {
  RETURN_IF_ERROR(Use());
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(res_.stream));
  return absl::OkStatus();
}

namespace {
// Far past any launch's host-side cost (cuBLAS's cold path is tens of us), short
// enough that a launch which waits for the device costs its sample little.
constexpr uint64_t kHoldLimitNs = 20'000'000;
}  // namespace

absl::Status CudaStream::HoldLaunches() {
  if (holding_) return absl::FailedPreconditionError("HoldLaunches while a hold is open");
  RETURN_IF_ERROR(Use());
  if (hold_words_ == nullptr) {
    void* words = nullptr;
    CUDA_RETURN_IF_ERROR(cudaHostAlloc(&words, 2 * sizeof(unsigned), cudaHostAllocMapped));
    hold_words_ = static_cast<unsigned*>(words);
    hold_words_[0] = hold_words_[1] = 0;
    CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(reinterpret_cast<void**>(&hold_device_words_),
                                                  hold_words_, 0));
  }
  unsigned* device_words = hold_device_words_;
  ++hold_generation_;
  if (hold_generation_ == 0) ++hold_generation_;  // 0 is the words' initial value
  CUDA_RETURN_IF_ERROR(LaunchHold(device_words, hold_generation_, kHoldLimitNs,
                                  device_words + 1, res_.stream));
  holding_ = true;
  return absl::OkStatus();
}

absl::Status CudaStream::ReleaseLaunches() {
  if (!holding_) return absl::OkStatus();
  holding_ = false;
  __atomic_store_n(&hold_words_[0], hold_generation_, __ATOMIC_SEQ_CST);
  return absl::OkStatus();
}

bool CudaStream::LastHoldExpired() {
  return hold_words_ != nullptr && hold_generation_ != 0 &&
         __atomic_load_n(&hold_words_[1], __ATOMIC_SEQ_CST) == hold_generation_;
}

absl::Status CudaStream::Reference(const Problem& p, const Buffer& a, const Buffer& b,
                                   std::vector<double>* c) {
  RETURN_IF_ERROR(CheckFits("Reference A", p.a_bytes(), a));
  RETURN_IF_ERROR(CheckFits("Reference B", p.b_bytes(), b));
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("Reference: empty problem ", p.ToString()));
  }
  RETURN_IF_ERROR(Use());
  const size_t count = static_cast<size_t>(p.m) * static_cast<size_t>(p.n);
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> out, pool_->Allocate(count * sizeof(double)));
  CUDA_RETURN_IF_ERROR(LaunchReference(ElemOf(p.dtype), const_cast<Buffer&>(a).data(),
                                       const_cast<Buffer&>(b).data(),
                                       static_cast<double*>(out->data()), p.m, p.n, p.k,
                                       res_.stream));
  c->resize(count);
  return CopyToHostRaw(c->data(), out->data(), count * sizeof(double));
}

absl::Status CudaStream::WaitSharedEvent(std::string_view handle) {
  if (handle.size() != sizeof(cudaIpcEventHandle_t)) {
    return absl::InvalidArgumentError(absl::StrCat("wait_event: expected ", sizeof(cudaIpcEventHandle_t),
                                                   " bytes (cudaIpcEventHandle_t), got ", handle.size()));
  }
  RETURN_IF_ERROR(Use());
  cudaIpcEventHandle_t h;
  std::memcpy(&h, handle.data(), sizeof h);
  cudaEvent_t event = nullptr;
  if (const cudaError_t err = cudaIpcOpenEventHandle(&event, h); err != cudaSuccess) {
    cudaGetLastError();  // a stale handle is the client's error, not a broken context
    return absl::FailedPreconditionError(absl::StrCat(
        "wait_event: cudaIpcOpenEventHandle failed: ", cudaGetErrorName(err),
        "; expected a live cudaIpcGetEventHandle of an event created with "
        "cudaEventInterprocess | cudaEventDisableTiming"));
  }
  const absl::Status waited = CUDA_STATUS(cudaStreamWaitEvent(res_.stream, event, 0));
  cudaEventDestroy(event);
  return waited;
}

absl::Status CudaStream::ReferenceRows(const Problem& p, const Buffer& a, const Buffer& b,
                                      const std::vector<int64_t>& rows, std::vector<double>* c) {
  RETURN_IF_ERROR(CheckFits("ReferenceRows A", p.a_bytes(), a));
  RETURN_IF_ERROR(CheckFits("ReferenceRows B", p.b_bytes(), b));
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("ReferenceRows: empty problem ", p.ToString()));
  }
  for (int64_t r : rows) {
    if (r < 0 || r >= p.m) {
      return absl::InvalidArgumentError(absl::StrCat("ReferenceRows: row ", r, " outside M=", p.m));
    }
  }
  c->clear();
  if (rows.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(Use());
  const size_t count = rows.size() * static_cast<size_t>(p.n);
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> index, pool_->Allocate(rows.size() * sizeof(int64_t)));
  RETURN_IF_ERROR(CopyToDevice(*index, rows.data(), rows.size() * sizeof(int64_t)));
  ASSIGN_OR_RETURN(std::unique_ptr<Buffer> out, pool_->Allocate(count * sizeof(double)));
  CUDA_RETURN_IF_ERROR(LaunchReferenceRows(ElemOf(p.dtype), const_cast<Buffer&>(a).data(),
                                           const_cast<Buffer&>(b).data(),
                                           static_cast<const int64_t*>(index->data()),
                                           static_cast<int64_t>(rows.size()),
                                           static_cast<double*>(out->data()), p.n, p.k,
                                           res_.stream));
  c->resize(count);
  return CopyToHostRaw(c->data(), out->data(), count * sizeof(double));
}

absl::Status CudaStream::CopyRowsToHost(void* dst, const Buffer& src, size_t row_bytes,
                                       const std::vector<int64_t>& rows) {
  for (int64_t r : rows) {
    if (r < 0) return absl::InvalidArgumentError(absl::StrCat("CopyRowsToHost: row ", r));
    RETURN_IF_ERROR(CheckFits("CopyRowsToHost", (r + 1) * row_bytes, src));
  }
  if (rows.empty() || row_bytes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Use());
  const char* from = static_cast<const char*>(const_cast<Buffer&>(src).data());
  char* to = static_cast<char*>(dst);
  char* stage = static_cast<char*>(staging_);
  const size_t capacity = 2 * staging_half_ / row_bytes;  // rows the whole staging holds
  if (capacity == 0) {  // a row larger than the staging: one at a time, in chunks
    for (size_t r = 0; r < rows.size(); ++r) {
      RETURN_IF_ERROR(CopyToHostRaw(to + r * row_bytes, from + rows[r] * row_bytes, row_bytes));
    }
    return absl::OkStatus();
  }
  // Earlier CopyToDevice chunks may still read the staging.
  for (cudaEvent_t e : staged_) CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e));
  // As many rows as the staging holds are enqueued (a run of consecutive rows
  // as one copy), then waited for once: a wait per row cost ~10-30 us each, a
  // few ms per candidate for the ~80 rows a sampled check reads.
  for (size_t first = 0; first < rows.size(); first += capacity) {
    const size_t last = std::min(rows.size(), first + capacity);
    for (size_t i = first; i < last;) {
      size_t j = i + 1;
      while (j < last && rows[j] == rows[j - 1] + 1) ++j;
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(stage + (i - first) * row_bytes,
                                           from + rows[i] * row_bytes, (j - i) * row_bytes,
                                           cudaMemcpyDeviceToHost, res_.stream));
      i = j;
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(staged_[0], res_.stream));
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staged_[0]));
    std::memcpy(to + first * row_bytes, stage, (last - first) * row_bytes);
  }
  return absl::OkStatus();
}

absl::Status CudaStream::FillRandom(Buffer& buf, DType dtype, size_t count, uint64_t seed) {
  // Below the table size every element is a draw of its own: the host fills it.
  if (count < kRandomTableEntries) return Stream::FillRandom(buf, dtype, count, seed);
  const size_t elem = ElementSize(dtype);
  RETURN_IF_ERROR(CheckFits("FillRandom", count * elem, buf));
  RETURN_IF_ERROR(Use());
  const RandomTable table = MakeRandomTable(dtype, seed);
  if (fill_table_ == nullptr) {  // sized for the widest dtype, kept for the stream's life
    ASSIGN_OR_RETURN(fill_table_, pool_->Allocate(kRandomTableEntries * sizeof(uint64_t)));
  }
  // Stream-ordered: a fill still reading the table from an earlier call has
  // finished before this copy overwrites it.
  RETURN_IF_ERROR(CopyToDevice(*fill_table_, table.entries.data(), table.entries.size()));
  CUDA_RETURN_IF_ERROR(LaunchFillFromTable(buf.data(), static_cast<int>(elem), fill_table_->data(),
                                           table.key, count, res_.stream));
  return absl::OkStatus();
}

template <typename Enqueue>
absl::StatusOr<int64_t> CudaStream::Count(Enqueue launch) {
  RETURN_IF_ERROR(Use());
  if (counter_ == nullptr) {
    ASSIGN_OR_RETURN(counter_, pool_->Allocate(sizeof(unsigned long long)));
  }
  auto* counter = static_cast<unsigned long long*>(counter_->data());
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(counter, 0, sizeof(*counter), res_.stream));
  CUDA_RETURN_IF_ERROR(launch(counter));
  unsigned long long host = 0;
  RETURN_IF_ERROR(CopyToHostRaw(&host, counter, sizeof(host)));
  return static_cast<int64_t>(host);
}

absl::StatusOr<int64_t> CudaStream::CountNonFinite(const Buffer& buf, DType dtype, size_t count) {
  RETURN_IF_ERROR(CheckFits("CountNonFinite", count * ElementSize(dtype), buf));
  const void* data = const_cast<Buffer&>(buf).data();
  return Count([&](unsigned long long* counter) {
    return LaunchCountNonFinite(ElemOf(dtype), data, count, counter, res_.stream);
  });
}

absl::StatusOr<int64_t> CudaStream::CountDifferences(const Buffer& x, const Buffer& y, DType dtype,
                                                     size_t count) {
  RETURN_IF_ERROR(CheckFits("CountDifferences x", count * ElementSize(dtype), x));
  RETURN_IF_ERROR(CheckFits("CountDifferences y", count * ElementSize(dtype), y));
  const void* px = const_cast<Buffer&>(x).data();
  const void* py = const_cast<Buffer&>(y).data();
  return Count([&](unsigned long long* counter) {
    return LaunchCountDifferences(static_cast<int>(ElementSize(dtype)), px, py, count, counter,
                                  res_.stream);
  });
}

absl::Status CudaStream::Launch(const LaunchKey& key, absl::FunctionRef<absl::Status()> launch) {
  if (recordings_ == nullptr) return launch();
  RETURN_IF_ERROR(Use());
  return recordings_->Launch(key, scratch_generation_, launch);
}

bool CudaStream::Replays(const LaunchKey& key) const {
  return recordings_ != nullptr && recordings_->Has(key, scratch_generation_);
}

absl::StatusOr<void*> CudaStream::GraphRecorder::Record(absl::FunctionRef<absl::Status()> launch) {
  cudaStream_t s = stream_.res_.stream;
  // Thread-local: other workers' streams go on launching; on this thread a call
  // that would wait for the device or allocate fails the capture instead.
  CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  stream_.recording_ = true;
  const absl::Status launched = launch();
  stream_.recording_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  if (!launched.ok() || ended != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // a refused call's error must not reach the next launch's check
    if (!launched.ok()) return launched;
    return absl::FailedPreconditionError(
        absl::StrCat("stream capture: ", cudaGetErrorName(ended != cudaSuccess ? ended : cudaErrorUnknown)));
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat("cudaGraphInstantiate: ", cudaGetErrorName(made)));
  }
  return static_cast<void*>(exec);
}

absl::Status CudaStream::GraphRecorder::Replay(void* recording) {
  CUDA_RETURN_IF_ERROR(cudaGraphLaunch(static_cast<cudaGraphExec_t>(recording), stream_.res_.stream));
  return absl::OkStatus();
}

void CudaStream::GraphRecorder::Destroy(void* recording) {
  cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(recording));
}

absl::StatusOr<void*> CudaStream::Scratch(size_t bytes) {
  if (scratch_ == nullptr || scratch_->bytes() < bytes) {
    if (recording_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "scratch: ", bytes, " bytes asked while a launch is recorded (",
          scratch_ == nullptr ? 0 : scratch_->bytes(), " held); a recording never allocates"));
    }
    RETURN_IF_ERROR(Use());
    ++scratch_generation_;  // recordings that name the old scratch are dropped
    // Grow geometrically so a sequence of growing shapes does not reallocate each time.
    const size_t want = std::max(bytes, scratch_ == nullptr ? size_t{0} : scratch_->bytes() * 2);
    scratch_.reset();  // the pool waits for this stream's work before reusing it
    ASSIGN_OR_RETURN(scratch_, pool_->Allocate(want));
  }
  return scratch_->data();
}

const StreamResources& Resources(Stream* s) {
  auto* cs = dynamic_cast<CudaStream*>(s);
  if (cs == nullptr) {
    // A programming error (a CUDA kernel given another backend's stream), not a runtime condition.
    std::fprintf(stderr, "arbiter::cuda::Resources: the stream is not a CudaStream\n");
    std::abort();
  }
  return cs->resources();
}

absl::StatusOr<void*> Scratch(Stream* s, size_t bytes) {
  auto* cs = dynamic_cast<CudaStream*>(s);
  if (cs == nullptr) {
    return absl::InvalidArgumentError("arbiter::cuda::Scratch: the stream is not a CudaStream");
  }
  return cs->Scratch(bytes);
}

}  // namespace arbiter::cuda
