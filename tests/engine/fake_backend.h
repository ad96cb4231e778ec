// A host-memory Backend for engine tests. Kernels are plain functions over host
// pointers; the device timer is a virtual clock the kernels advance, so tests
// control latency and noise exactly, with no sleeps and no real timing.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend.h"
#include "engine/candidate.h"

namespace arbiter::testing {

// Blocks kernels until opened and counts the kernels that entered: tests order
// engine threads with it instead of sleeping.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int entered = 0;
  void Pass() {
    std::unique_lock lock(mu);
    ++entered;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  }
  void WaitEntered() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered > 0; });
  }
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
  int Entered() {
    std::lock_guard lock(mu);
    return entered;
  }
};

// Polls for a state another thread reaches without signalling it (a caller
// blocked inside the engine's queue), for at most 30 s; false if it never came.
inline bool Eventually(const std::function<bool()>& condition) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // between checks, not a wait for one
  }
  return true;
}

class FakeBuffer final : public Buffer {
 public:
  explicit FakeBuffer(size_t bytes) : data_(bytes) {}
  void* data() override { return data_.data(); }
  size_t bytes() const override { return data_.size(); }

 private:
  std::vector<uint8_t> data_;
};

class FakeStream final : public Stream {
 public:
  absl::Status CopyToDevice(Buffer& dst, const void* src, size_t bytes) override {
    std::memcpy(dst.data(), src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const Buffer& src, size_t bytes) override {
    std::memcpy(dst, const_cast<Buffer&>(src).data(), bytes);
    return absl::OkStatus();
  }
  absl::Status Poison(Buffer& buf, DType dtype, size_t count) override {
    FillNaN(dtype, buf.data(), count);
    return absl::OkStatus();
  }
  // A flush is device work queued behind what is there (set_flush_seconds; none
  // by default): events recorded after it fire when it ends.
  // As a CUDA stream's: the first flush sets up what may wait for the device,
  // so it is refused behind a hold.
  absl::Status FlushCache() override {
    if (held_ && !flushed_) {
      return absl::FailedPreconditionError("FakeStream: first FlushCache behind a hold");
    }
    flushed_ = true;
    queued_ += flush_seconds_;
    return absl::OkStatus();
  }
  absl::Status TimerStart() override {
    start_ = clock_ + queued_;
    timer_running_ = true;
    return absl::OkStatus();
  }
  absl::Status TimerStop() override {
    stop_ = clock_ + queued_;
    timer_running_ = false;
    return absl::OkStatus();
  }
  absl::StatusOr<double> ElapsedSeconds() override { return stop_ - start_; }
  absl::Status Synchronize() override {
    clock_ += queued_;  // the host waits for the queue: the device is idle after
    queued_ = 0;
    return absl::OkStatus();
  }
  absl::Status Reference(const Problem& p, const Buffer& a, const Buffer& b,
                         std::vector<double>* c) override {
    const void* ad = const_cast<Buffer&>(a).data();
    const void* bd = const_cast<Buffer&>(b).data();
    c->assign(static_cast<size_t>(p.m * p.n), 0.0);
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t kk = 0; kk < p.k; ++kk) {
        const double av = LoadAsDouble(p.dtype, ad, i * p.k + kk);
        for (int64_t j = 0; j < p.n; ++j)
          (*c)[i * p.n + j] += av * LoadAsDouble(p.dtype, bd, kk * p.n + j);
      }
    return absl::OkStatus();
  }
  // Called by fake kernels: the "device" spends `seconds`, stretched by the drift
  // (each call after the first takes `drift` longer than the one before, as a
  // device heating up would).
  void Advance(double seconds) {
    clock_ += queued_ + seconds * (1 + drift_ * advances_++);
    queued_ = 0;
  }
  void set_drift(double drift) { drift_ = drift; }
  void set_flush_seconds(double seconds) { flush_seconds_ = seconds; }
  // A fake kernel's host-side launch cost: the host spends `seconds` before the
  // kernel reaches the device, which idles for what queued work does not cover -
  // unless a hold keeps the device waiting until all is enqueued.
  void HostLaunch(double seconds) {
    if (held_ && !holds_expire_) return;
    clock_ += std::max(queued_, seconds);
    queued_ = 0;
  }
  // A hold: the device starts nothing until the release (HostLaunch above).
  absl::Status HoldLaunches() override {
    held_ = true;
    ++holds_;
    return absl::OkStatus();
  }
  absl::Status ReleaseLaunches() override {
    held_ = false;
    return absl::OkStatus();
  }
  bool LastHoldExpired() override { return holds_ > 0 && holds_expire_; }
  // As a stream that keeps recordings of launches would say of every key.
  bool Replays(const LaunchKey&) const override { return replays_; }
  void set_replays(bool replays) { replays_ = replays; }
  // Every hold gives up before the host has enqueued the sample, as a real one
  // does when a launch waits for the device.
  void set_holds_expire(bool expire) { holds_expire_ = expire; }
  int holds() const { return holds_; }
  bool held() const { return held_; }
  // Between TimerStart and TimerStop: a kernel running now is a timed sample.
  bool timer_running() const { return timer_running_; }

 private:
  double clock_ = 0, start_ = 0, stop_ = 0;
  double queued_ = 0;         // device work enqueued after clock_ (flushes)
  double flush_seconds_ = 0;  // what one FlushCache queues
  double drift_ = 0;
  int64_t advances_ = 0;
  bool timer_running_ = false;
  bool held_ = false, holds_expire_ = false, flushed_ = false, replays_ = false;
  int holds_ = 0;
};

// A mapped region's stand-in: host memory aligned as a device allocation is
// (every ref must be 256-byte aligned), zero-filled. `host_side`: it stands
// for a client's host memory on a GPU, which dispatch copies over the bus.
class FakeRegion final : public Buffer {
 public:
  explicit FakeRegion(size_t bytes, bool host_side = false)
      : bytes_(bytes), host_side_(host_side),
        data_(std::aligned_alloc(256, (bytes + 255) / 256 * 256)) {
    std::memset(data_, 0, bytes);
  }
  ~FakeRegion() override { std::free(data_); }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }
  bool host_side() const override { return host_side_; }

 private:
  size_t bytes_;
  bool host_side_;
  void* data_;
};

// What a FakeBackend's shared events saw, per slot: records and host waits.
struct EventLog {
  std::mutex mu;
  std::map<size_t, int> records, syncs;
};

class FakeSharedEvents final : public SharedEvents {
 public:
  FakeSharedEvents(size_t count, std::shared_ptr<EventLog> log) : count_(count), log_(std::move(log)) {}
  size_t size() const override { return count_; }
  std::string handle(size_t slot) const override { return "fake-event-" + std::to_string(slot); }
  absl::Status Record(size_t slot, Stream&) override {
    std::lock_guard lock(log_->mu);
    ++log_->records[slot];
    return absl::OkStatus();
  }
  absl::Status Synchronize(size_t slot) override {
    std::lock_guard lock(log_->mu);
    ++log_->syncs[slot];
    return absl::OkStatus();
  }

 private:
  const size_t count_;
  std::shared_ptr<EventLog> log_;
};

class FakeBackend final : public Backend {
 public:
  // `name` is part of the fingerprint: fakes of different names never share verdicts.
  explicit FakeBackend(std::string name = "fake device") {
    info_.backend = "fake";
    info_.name = std::move(name);
    info_.arch = "fake";
    info_.versions["fake"] = "1";
  }
  const DeviceInfo& info() const override { return info_; }
  std::string ArchitectureGap(const std::string& claim) const override {
    return claim == "fake" ? "" : "claim \"" + claim + "\" does not admit the fake device";
  }
  absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) override {
    return std::make_unique<FakeBuffer>(bytes);
  }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override {
    return std::make_unique<FakeStream>();
  }
  absl::Status Health() const override {
    std::lock_guard lock(health_mu_);
    return health_;
  }
  // A planted device fault: Health() reports `status` from now on.
  void SetHealth(absl::Status status) {
    std::lock_guard lock(health_mu_);
    health_ = std::move(status);
  }
  // From now on the backend shares events (FakeSharedEvents, logging to the
  // result) and maps host-memfd regions as fresh host buffers of their size.
  std::shared_ptr<EventLog> ShareEvents() {
    events_ = std::make_shared<EventLog>();
    return events_;
  }
  absl::StatusOr<std::unique_ptr<SharedEvents>> CreateSharedEvents(size_t count) override {
    if (events_ == nullptr) return Backend::CreateSharedEvents(count);
    return std::make_unique<FakeSharedEvents>(count, events_);
  }
  std::vector<RegionKind> RegionKinds() const override {
    if (events_ == nullptr) return {};
    return {RegionKind::kHostMemfd};
  }
  absl::StatusOr<std::unique_ptr<Buffer>> MapRegion(const RegionSource& source) override {
    if (events_ == nullptr) return Backend::MapRegion(source);
    return std::make_unique<FakeRegion>(static_cast<size_t>(source.bytes), host_side_regions_);
  }
  // From now on the regions it maps stand for host memory on a GPU
  // (Buffer::host_side), as the CUDA backend's host-memfd regions do.
  void MapRegionsHostSide() { host_side_regions_ = true; }

 private:
  std::shared_ptr<EventLog> events_;
  bool host_side_regions_ = false;
  DeviceInfo info_;
  mutable std::mutex health_mu_;
  absl::Status health_;
};

// Naive matmul with f32 accumulation for 16-bit dtypes and f32, f64 for f64;
// `k_used` < K skips the tail (a planted bug), `rows_written` < M leaves rows unwritten.
inline void NaiveGemm(const GemmArgs& args, int64_t k_used, int64_t rows_written) {
  const Problem& p = args.problem;
  for (int64_t i = 0; i < std::min(p.m, rows_written); ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double acc64 = 0;
      float acc32 = 0;
      for (int64_t kk = 0; kk < k_used; ++kk) {
        const double x = LoadAsDouble(p.dtype, args.a, i * p.k + kk) *
                         LoadAsDouble(p.dtype, args.b, kk * p.n + j);
        acc64 += x;
        acc32 += static_cast<float>(x);
      }
      StoreFromDouble(p.dtype, args.c, i * p.n + j, p.dtype == DType::kF64 ? acc64 : acc32);
    }
}

inline MemberContract FakeContract(DType dtype, Determinism det = Determinism::kRunToRun) {
  MemberContract c;
  c.dtype = dtype;
  c.entry = "fake_entry";
  c.accuracy = {1e-5, 1e-6};
  c.determinism = det;
  c.arch = "fake";
  return c;
}

// A candidate for every dtype whose kernel is `run`.
inline CandidateSpec FakeCandidate(std::string name, int tier, KernelFn run,
                                   Determinism det = Determinism::kRunToRun, int version = 1) {
  CandidateSpec spec;
  spec.name = std::move(name);
  spec.version = version;
  spec.tier = tier;
  for (DType d : kAllDTypes) spec.members.push_back({FakeContract(d, det), run});
  return spec;
}

// A correct kernel whose fake device time is `seconds` (times a per-call jitter pattern).
inline KernelFn TimedKernel(double seconds, double jitter = 0.0) {
  auto calls = std::make_shared<int>(0);
  return [=](const GemmArgs& args) {
    NaiveGemm(args, args.problem.k, args.problem.m);
    const double wobble = ((*calls)++ % 2 == 0) ? 1 + jitter : 1 - jitter;
    static_cast<FakeStream*>(args.stream)->Advance(seconds * wobble);
    return absl::OkStatus();
  };
}

// A correct kernel of `device_seconds` whose launch costs the host `host_seconds`
// first (cuBLAS's heuristics and descriptors, a pre-pass, a cluster launch).
inline KernelFn HostCostlyKernel(double host_seconds, double device_seconds) {
  return [=](const GemmArgs& args) {
    NaiveGemm(args, args.problem.k, args.problem.m);
    auto* stream = static_cast<FakeStream*>(args.stream);
    stream->HostLaunch(host_seconds);
    stream->Advance(device_seconds);
    return absl::OkStatus();
  };
}

// TimedKernel(seconds) that first waits at `gate` - on every problem, or on
// those `held` picks: tests hold a kernel inside the engine to order its threads.
inline KernelFn GatedKernel(std::shared_ptr<Gate> gate, double seconds = 1e-6,
                            std::function<bool(const Problem&)> held = nullptr) {
  KernelFn run = TimedKernel(seconds);
  return [gate = std::move(gate), held = std::move(held), run](const GemmArgs& args) {
    if (!held || held(args.problem)) gate->Pass();
    return run(args);
  };
}

// A correct kernel of seconds(problem) times a factor that changes from one
// timed run to the next (1, 3, 0.5, 2.5, 1, 4, 0.6, 2, 1.5, then again):
// candidates timed in the same rounds of a race share it, as the samples of one
// round on a device share its clock, the cache flush and the driver. Each
// candidate's own spread is then about 100%, while their ratio in every round
// is exact.
inline KernelFn RoundScatteredKernel(std::function<double(const Problem&)> seconds) {
  auto timed_runs = std::make_shared<int>(0);
  return [=](const GemmArgs& args) {
    NaiveGemm(args, args.problem.k, args.problem.m);
    auto* stream = static_cast<FakeStream*>(args.stream);
    static constexpr double kFactor[] = {1, 3, 0.5, 2.5, 1, 4, 0.6, 2, 1.5};
    const double factor = stream->timer_running() ? kFactor[(*timed_runs)++ % 9] : 1;
    stream->Advance(seconds(args.problem) * factor);
    return absl::OkStatus();
  };
}
inline KernelFn RoundScatteredKernel(double seconds) {
  return RoundScatteredKernel([seconds](const Problem&) { return seconds; });
}

// A correct kernel of seconds(problem), times `slow_factor` on the timed runs
// at a shape whose index among that shape's timed runs (the oracle's checked run
// is the first, 0) modulo 10 is in `slow`: a challenger ahead in most rounds of
// a race and level (or behind) in the others, the same in every race at a shape.
inline KernelFn SlowInSomeRuns(std::function<double(const Problem&)> seconds, double slow_factor,
                               std::vector<int> slow) {
  auto timed_runs = std::make_shared<std::map<std::string, int>>();
  return [=](const GemmArgs& args) {
    NaiveGemm(args, args.problem.k, args.problem.m);
    auto* stream = static_cast<FakeStream*>(args.stream);
    double factor = 1;
    if (stream->timer_running()) {
      const int i = (*timed_runs)[args.problem.ToString()]++;
      if (std::find(slow.begin(), slow.end(), i % 10) != slow.end()) factor = slow_factor;
    }
    stream->Advance(seconds(args.problem) * factor);
    return absl::OkStatus();
  };
}

// A correct kernel whose fake device time is `seconds(problem)`: kernels whose
// ranking changes inside a bucket, as real ones do.
inline KernelFn ShapedKernel(std::function<double(const Problem&)> seconds) {
  return [=](const GemmArgs& args) {
    NaiveGemm(args, args.problem.k, args.problem.m);
    static_cast<FakeStream*>(args.stream)->Advance(seconds(args.problem));
    return absl::OkStatus();
  };
}

}  // namespace arbiter::testing
