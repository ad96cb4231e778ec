// The hardware boundary (leveldb's Env is the model). The engine sees devices
// only through these interfaces; backends/cpu and backends/cuda implement them,
// and tests use fakes. Nothing here includes CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

#include "engine/problem.h"
#include "engine/status.h"

namespace arbiter {

// What identifies a device for the verdict store: verdicts measured under one
// fingerprint are never served under another.
struct DeviceInfo {
  std::string backend;         // "cpu" or "cuda"
  std::string name;            // "NVIDIA H200", CPU model name
  std::string arch;            // "cpu", "sm_90", ...
  int compute_capability = 0;  // 90 for sm_90; 0 on CPU
  int multiprocessors = 0;     // SMs, or CPU threads used
  int64_t cache_bytes = 0;     // last-level cache flushed for cold timing
  int64_t memory_bytes = 0;    // device memory (host RAM on CPU); 0 unknown. Not in the fingerprint
  std::string uuid;            // GPU UUID where there is one
  std::map<std::string, std::string> versions;  // driver, runtime, cublas, openblas, ...

  // Stable text of every field that can change a measurement; the store key.
  std::string Fingerprint() const;
};

// Device memory. Owned by whoever allocated it; freed (or returned to the
// backend's pool) by its destructor.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
  // Host memory that this backend's kernels do not address (a client's host
  // region on a GPU backend): a dispatch copies it to the device and C back
  // over the bus, page-locked, with no staging. False for device memory, and
  // for the CPU backend's, whose device is the host.
  virtual bool host_side() const { return false; }
};

// A window of device memory someone else owns (a region or resident tensor at
// an offset): a Buffer for the calls that take one; frees nothing.
class BufferView final : public Buffer {
 public:
  BufferView(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
};

// How a client shares memory with the daemon (the wire's RegionKind).
enum class RegionKind {
  kHostMemfd = 1,  // CPU: a memfd sealed against shrinking, mapped shared
  kCudaVmmFd = 2,  // CUDA: a cuMemCreate allocation exported as a POSIX fd
  kCudaIpc = 3,    // CUDA: a cudaIpcMemHandle_t of a whole cudaMalloc allocation
};
const char* RegionKindName(RegionKind kind);  // "host_memfd", "cuda_vmm_fd", "cuda_ipc"

// What RegisterRegion hands the backend to map.
struct RegionSource {
  RegionKind kind = RegionKind::kHostMemfd;
  int64_t bytes = 0;       // the client's claim; the backend checks it against what it maps
  int fd = -1;             // kHostMemfd, kCudaVmmFd: borrowed (the caller closes it)
  std::string ipc_handle;  // kCudaIpc: the 64 bytes of cudaIpcMemHandle_t
};

// An ordered queue of device work (a CUDA stream, or the calling thread on CPU).
// Not thread-safe: one worker uses one stream at a time.
// Host bytes in one piece. An operand that arrived in several buffers (the
// slices of a gRPC message) is a list of these, in order.
struct HostPiece {
  const void* data = nullptr;
  size_t bytes = 0;
};
size_t TotalBytes(absl::Span<const HostPiece> pieces);

// One launch of a candidate, as Stream::Launch knows it: the same candidate
// (name and version), problem and operand addresses enqueue the same work.
struct LaunchKey {
  std::string_view candidate;
  int64_t version = 0;
  Problem problem;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  bool timed = false;  // the work starts and stops the stream's timer around the kernel
};

class Stream {
 public:
  virtual ~Stream() = default;
  // Enqueues a dispatch's work: `launch`, which enqueues device work on this
  // stream and nothing else, and enqueues the same work whenever `key` is the
  // same. A backend whose launches cost the host more than a replay of them may
  // record the work and replay it for a later launch of the same key
  // (engine/launch_recordings.h: a GPU's CUDA graphs). The default launches.
  virtual absl::Status Launch(const LaunchKey& key, absl::FunctionRef<absl::Status()> launch) {
    return launch();
  }
  // Whether Launch would replay a recording for `key`: no host launch then
  // separates the work's parts on the device, so it needs no launch hold.
  virtual bool Replays(const LaunchKey& key) const { return false; }
  virtual absl::Status CopyToDevice(Buffer& dst, const void* src, size_t bytes) = 0;
  // Copies `pieces`, in order, to the start of `dst`: an operand gathered from
  // where it arrived, never joined on the host first. The pieces may be freed
  // once it returns. The default copies each piece with CopyToDevice; a backend
  // whose every copy has a fixed cost (a GPU's) packs small pieces together.
  virtual absl::Status GatherToDevice(Buffer& dst, absl::Span<const HostPiece> pieces);
  // Copies `bytes` of host-side memory (Buffer::host_side: page-locked) at
  // `src` to the start of `dst` in stream order, with no staging: `src` must
  // stay as it is until the stream's work so far is done. The default copies
  // at once (CopyToDevice).
  virtual absl::Status CopyFromHostSide(Buffer& dst, const void* src, size_t bytes) {
    return CopyToDevice(dst, src, bytes);
  }
  virtual absl::Status CopyToHost(void* dst, const Buffer& src, size_t bytes) = 0;
  // Fills the first `count` elements of `buf` with NaN.
  virtual absl::Status Poison(Buffer& buf, DType dtype, size_t count) = 0;
  // Evicts the last-level cache so the next timed run starts cold. Not timed.
  virtual absl::Status FlushCache() = 0;
  // Device timer: Start, enqueue work, Stop; ElapsedSeconds waits for the Stop,
  // and so for all the work enqueued before it (a dispatch relies on that: C is
  // complete once it returns). On a GPU these are events around the kernel
  // alone, never host wall time.
  virtual absl::Status TimerStart() = 0;
  virtual absl::Status TimerStop() = 0;
  virtual absl::StatusOr<double> ElapsedSeconds() = 0;
  virtual absl::Status Synchronize() = 0;
  // Holds this stream's device work back until ReleaseLaunches, so that what is
  // enqueued in between (a flush, the timer's start, a candidate's kernels, the
  // timer's stop) then runs back to back however long the host took to enqueue
  // it: a launch's host-side cost never enters a timed window, whatever it
  // follows. A hold never released ends by itself after a bound (a launch that
  // waits for the device would otherwise wait forever); LastHoldExpired, asked
  // once the held work completed, says whether it ended so. Nothing that may
  // wait for the device belongs behind a hold (a CUDA stream's first FlushCache
  // allocates: it is refused there). The default holds nothing: a host
  // backend's timer measures the host.
  virtual absl::Status HoldLaunches() { return absl::OkStatus(); }
  virtual absl::Status ReleaseLaunches() { return absl::OkStatus(); }
  virtual bool LastHoldExpired() { return false; }
  // f64-accumulated reference over the operands as stored, written to host.
  virtual absl::Status Reference(const Problem& p, const Buffer& a, const Buffer& b,
                                 std::vector<double>* c) = 0;
  // Makes later work on this stream wait for an event another process recorded
  // (the 64 bytes of a cudaIpcEventHandle_t). UNIMPLEMENTED where there is none.
  virtual absl::Status WaitSharedEvent(std::string_view handle) {
    return absl::UnimplementedError("this backend has no shared events (cudaIpcEventHandle_t)");
  }

  // What the measurer uses to check a large C without bringing all of it to the
  // host. Each default goes through the host (Reference, CopyToHost) and is right
  // for any backend; a device backend overrides them so the work stays on the
  // device and only counts or a few rows cross the bus.

  // The reference for the listed rows of C only, packed: rows.size() x N doubles.
  virtual absl::Status ReferenceRows(const Problem& p, const Buffer& a, const Buffer& b,
                                     const std::vector<int64_t>& rows, std::vector<double>* c);
  // Copies the listed rows of a row-major `src` (each `row_bytes` long) to `dst`, packed.
  virtual absl::Status CopyRowsToHost(void* dst, const Buffer& src, size_t row_bytes,
                                      const std::vector<int64_t>& rows);
  // How many of the first `count` elements of `buf` are NaN or Inf.
  virtual absl::StatusOr<int64_t> CountNonFinite(const Buffer& buf, DType dtype, size_t count);
  // How many of the first `count` elements differ bitwise between `x` and `y`.
  virtual absl::StatusOr<int64_t> CountDifferences(const Buffer& x, const Buffer& y, DType dtype,
                                                   size_t count);
  // Fills the first `count` elements of `buf` with the values FillRandom(dtype,
  // ..., count, seed) gives (engine/random_fill.h); may return before the fill is
  // complete (later work on this stream sees it). The default fills on the host
  // and copies; a device backend fills on the device from the same table.
  virtual absl::Status FillRandom(Buffer& buf, DType dtype, size_t count, uint64_t seed);
};

// A hold on `stream`'s launches (Stream::HoldLaunches) for one scope: taken when
// `want`, released by Release or, at the latest, when the scope ends (held work
// must run before anything waits for it).
class ScopedLaunchHold {
 public:
  ScopedLaunchHold(Stream& stream, bool want)
      : stream_(stream), status_(want ? stream.HoldLaunches() : absl::OkStatus()),
        held_(want && status_.ok()), open_(held_) {}
  ~ScopedLaunchHold() { Release(); }
  ScopedLaunchHold(const ScopedLaunchHold&) = delete;
  ScopedLaunchHold& operator=(const ScopedLaunchHold&) = delete;

  void Release() {
    if (open_) stream_.ReleaseLaunches().IgnoreError();
    open_ = false;
  }
  // Why the hold was not taken, when it was wanted and refused.
  const absl::Status& status() const { return status_; }
  bool held() const { return held_; }
  // Once the held work completed: whether this hold gave up before its release.
  bool Expired() { return held_ && stream_.LastHoldExpired(); }

 private:
  Stream& stream_;
  const absl::Status status_;
  const bool held_;
  bool open_;
};

// Events this backend records on its streams and shares with another process
// (a client waiting for a Matmul's C without the reply waiting for the kernel):
// a fixed ring, each exported once. On CUDA, interprocess events
// (cudaEventInterprocess | cudaEventDisableTiming) and their 64-byte
// cudaIpcEventHandle_t.
// Not thread-safe per slot: one dispatch records or waits on a slot at a time
// (CompletionTable hands the slots out).
class SharedEvents {
 public:
  virtual ~SharedEvents() = default;
  virtual size_t size() const = 0;
  // What another process opens slot `slot` by.
  virtual std::string handle(size_t slot) const = 0;
  // Records `slot` on `stream`: it completes once the work enqueued there before it has.
  virtual absl::Status Record(size_t slot, Stream& stream) = 0;
  // Waits on the host until `slot`'s last record has completed (at once if never recorded).
  virtual absl::Status Synchronize(size_t slot) = 0;
};

// How host buffers a caller keeps for reuse are got and given back. Neither
// function refers to the backend that handed them out, so buffers may outlive it.
struct HostAllocator {
  std::function<void*(size_t bytes)> allocate = [](size_t bytes) { return std::malloc(bytes); };
  std::function<void(void* data)> free = [](void* data) { std::free(data); };
};

// Thread-safe: provides internal synchronization.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& info() const = 0;
  // Empty when a contract's architecture claim admits this device; else why not.
  virtual std::string ArchitectureGap(const std::string& claim) const = 0;
  virtual absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) = 0;
  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream() = 0;
  // OK while the device can serve; a sticky device error is reported here and
  // makes the daemon NOT_SERVING.
  virtual absl::Status Health() const { return absl::OkStatus(); }

  // The region kinds MapRegion accepts here; empty: none.
  virtual std::vector<RegionKind> RegionKinds() const { return {}; }
  // Maps memory a client shares so kernels read and write it in place; the
  // returned Buffer unmaps it when destroyed, and holds no reference to
  // `source.fd`. UNIMPLEMENTED for a kind not in RegionKinds(); INVALID_ARGUMENT
  // or FAILED_PRECONDITION, naming what was expected, when the memory is smaller
  // than `source.bytes`, on another device, or cannot be mapped.
  virtual absl::StatusOr<std::unique_ptr<Buffer>> MapRegion(const RegionSource& source) {
    return absl::UnimplementedError("this backend maps no client memory");
  }
  // `count` events shared with a client process (SharedEvents). FAILED_PRECONDITION,
  // saying why, where there are none: the CPU backend completes every
  // dispatch before it returns, so there is nothing to wait on.
  virtual absl::StatusOr<std::unique_ptr<SharedEvents>> CreateSharedEvents(size_t count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "completion EVENT: the ", info().backend,
        " backend shares no events with clients; it completes every Matmul before replying, so "
        "ask for COMPLETION_SYNC (the default)"));
  }
  // The SM (core) clock now, in MHz, where the device reports one (a GPU through
  // NVML); nullopt where it does not. Read during a race and kept in the verdict.
  virtual std::optional<double> SmClockMhz() const { return std::nullopt; }
  // Host memory this device copies to and from at full speed, without staging
  // (page-locked on a GPU): for buffers kept and reused, since getting it costs
  // far more than malloc. allocate answers null when out of it. Default: malloc.
  virtual HostAllocator host_allocator() const { return {}; }
};

// Arguments of one kernel launch; pointers are device pointers of `stream`'s backend.
struct GemmArgs {
  Problem problem;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  Stream* stream = nullptr;
};

}  // namespace arbiter
