// The CUDA backend on a real GPU: fingerprint, memory pool, staged copies,
// poison, the random operand fill and batched row copies, device timer, the
// device f64 reference against a CPU one, and a sticky device error turning
// Health() bad, and the launch hold around a timed sample. Skips (saying so) without a GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_resources.h"
#include "backends/cuda/cuda_stream.h"
#include "engine/launch_recordings.h"
#include "engine/dispatcher.h"
#include "engine/measurer.h"
#include "engine/quarantine.h"
#include "engine/registry.h"
#include "engine/selection_policy.h"
#include "engine/stream_pool.h"
#include "engine/verdict_cache.h"
#include "engine/verdict_store.h"
#include "engine/oracle.h"
#include "tests/backends/cuda/test_kernels.h"

namespace arbiter::cuda {
namespace {

std::unique_ptr<CudaBackend> MakeBackend(CudaBackendOptions options = {}) {
  absl::StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(options);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

// Every test runs on the live GPU, and is skipped (saying so) without one.
class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaBackend::VisibleDevices() == 0) {
      GTEST_SKIP() << "no CUDA device visible: GPU test skipped, not passed";
    }
  }

  // The backend (with `options`) and one stream on it, into backend_ and stream_.
  void Open(CudaBackendOptions options = {}) {
    backend_ = MakeBackend(options);
    ASSERT_NE(backend_, nullptr);
    absl::StatusOr<std::unique_ptr<Stream>> stream = backend_->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = *std::move(stream);
  }

  // A device buffer holding `host`; null, after failing the test, when that
  // cannot be done.
  std::unique_ptr<Buffer> Upload(const std::vector<unsigned char>& host) {
    absl::StatusOr<std::unique_ptr<Buffer>> buf = backend_->Allocate(host.size());
    if (!buf.ok()) {
      ADD_FAILURE() << "allocate: " << buf.status();
      return nullptr;
    }
    if (absl::Status st = stream_->CopyToDevice(**buf, host.data(), host.size()); !st.ok()) {
      ADD_FAILURE() << "copy to device: " << st;
      return nullptr;
    }
    return *std::move(buf);
  }

  std::unique_ptr<CudaBackend> backend_;
  std::unique_ptr<Stream> stream_;
};

TEST_F(CudaBackendTest, DeviceInfoDescribesTheLiveDevice) {
  auto backend = MakeBackend();
  ASSERT_NE(backend, nullptr);
  const DeviceInfo& info = backend->info();
  EXPECT_EQ(info.backend, "cuda");
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.compute_capability, 50);
  EXPECT_EQ(info.arch, "sm_" + std::to_string(info.compute_capability));
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_GT(info.cache_bytes, 0);
  EXPECT_EQ(info.uuid.rfind("GPU-", 0), 0u) << info.uuid;
  for (const char* key : {"driver", "runtime", "cublas", "cublaslt"}) {
    ASSERT_TRUE(info.versions.count(key)) << key;
    EXPECT_FALSE(info.versions.at(key).empty()) << key;
  }
  EXPECT_TRUE(backend->Health().ok()) << backend->Health();
  std::printf("device: %s %s, %d SMs, L2 %lld bytes, %s, driver %s runtime %s cublas %s\n",
              info.name.c_str(), info.arch.c_str(), info.multiprocessors,
              static_cast<long long>(info.cache_bytes), info.uuid.c_str(),
              info.versions.at("driver").c_str(), info.versions.at("runtime").c_str(),
              info.versions.at("cublas").c_str());
}

// --device GPU-...: a daemon owns the GPU with that UUID whatever its ordinal.
TEST_F(CudaBackendTest, EveryVisibleGpuIsFoundByItsUuidAndAnUnknownUuidNamesTheVisibleOnes) {
  for (int d = 0; d < CudaBackend::VisibleDevices(); ++d) {
    CudaBackendOptions options;
    options.device = d;
    auto backend = MakeBackend(options);
    ASSERT_NE(backend, nullptr);
    absl::StatusOr<int> found = CudaBackend::FindDevice(backend->info().uuid);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, d) << backend->info().uuid;
  }
  const absl::StatusOr<int> unknown =
      CudaBackend::FindDevice("GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("visible: 0: GPU-"), std::string::npos)
      << unknown.status();
}

TEST_F(CudaBackendTest, ArchitectureClaimsAreJudgedAgainstTheLiveDevice) {
  auto backend = MakeBackend();
  ASSERT_NE(backend, nullptr);
  const int cc = backend->info().compute_capability;
  EXPECT_EQ(backend->ArchitectureGap("sm_" + std::to_string(cc)), "");
  EXPECT_EQ(backend->ArchitectureGap("sm_50+"), "");
  EXPECT_NE(backend->ArchitectureGap("sm_" + std::to_string(cc + 1) + "+"), "");
  EXPECT_NE(backend->ArchitectureGap("cpu"), "");
}

TEST_F(CudaBackendTest, CopiesLargerThanStagingRoundTrip) {
  CudaBackendOptions options;
  options.staging_bytes = 2 << 20;  // 1 MiB halves: the copy below takes several chunks
  ASSERT_NO_FATAL_FAILURE(Open(options));
  const size_t bytes = (5 << 20) + 12345;  // not a multiple of the chunk
  std::vector<unsigned char> src(bytes), back(bytes, 0);
  std::mt19937 rng(7);
  for (auto& v : src) v = static_cast<unsigned char>(rng());
  std::unique_ptr<Buffer> buf = Upload(src);
  ASSERT_NE(buf, nullptr);
  ASSERT_TRUE(stream_->CopyToHost(back.data(), *buf, bytes).ok());
  EXPECT_EQ(std::memcmp(src.data(), back.data(), bytes), 0);
  EXPECT_FALSE(stream_->CopyToHost(back.data(), *buf, bytes + 1).ok())
      << "a copy past the buffer must be refused";
}

// An operand gathered from gRPC-sized pieces crosses several staging chunks
// (default staging); C copied into page-locked memory from the backend's host
// allocator goes by DMA alone, straight to an unaligned place in it, and into
// pageable memory through the staging: both are every byte, nothing written
// outside.
TEST_F(CudaBackendTest, GatheredOperandComesBackIntoPageLockedAndPageableMemory) {
  ASSERT_NO_FATAL_FAILURE(Open());
  const size_t bytes = (9 << 20) + 777;  // past two 4 MiB chunks, not a multiple of one
  std::vector<unsigned char> src(bytes);
  std::mt19937 rng(11);
  for (auto& v : src) v = static_cast<unsigned char>(rng());
  std::vector<HostPiece> pieces;
  for (size_t at = 0; at < bytes;) {  // pieces of 1..40000 bytes, as a message's slices are
    const size_t n = std::min<size_t>(bytes - at, 1 + rng() % 40000);
    pieces.push_back(HostPiece{src.data() + at, n});
    at += n;
  }
  absl::StatusOr<std::unique_ptr<Buffer>> buf = backend_->Allocate(bytes);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE(stream_->GatherToDevice(**buf, pieces).ok());

  const HostAllocator host = backend_->host_allocator();
  auto* locked = static_cast<unsigned char*>(host.allocate(bytes + 2));
  ASSERT_NE(locked, nullptr) << "no page-locked memory for " << bytes + 2 << " bytes";
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, locked), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "the host allocator's memory is not page-locked";
  std::memset(locked, 0xEE, bytes + 2);
  absl::Status st = stream_->CopyToHost(locked + 1, **buf, bytes);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(std::memcmp(locked + 1, src.data(), bytes), 0) << "page-locked copy differs";
  EXPECT_EQ(locked[0], 0xEE) << "written before the destination";
  EXPECT_EQ(locked[bytes + 1], 0xEE) << "written past the destination";
  host.free(locked);

  std::vector<unsigned char> pageable(bytes, 0);
  st = stream_->CopyToHost(pageable.data(), **buf, bytes);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(std::memcmp(pageable.data(), src.data(), bytes), 0) << "pageable copy differs";
}

// Pieces as large as a gRPC read can make them (up to 3 MiB, so chunks and the
// packing threads' parts start and end inside one), empty ones among them, gathered
// into the middle of a device buffer whose every other byte keeps its poison: with
// one packing thread and with several, every byte lands and nothing outside it.
TEST_F(CudaBackendTest, GatherOfLargeAndEmptyPiecesIsExactOnAnyPackingThreadCount) {
  const size_t bytes = (13 << 20) + 4099, guard = 4096;
  std::vector<unsigned char> src(bytes);
  std::mt19937 rng(12);
  for (auto& v : src) v = static_cast<unsigned char>(rng());
  std::vector<HostPiece> pieces;
  for (size_t at = 0; at < bytes;) {
    const size_t n = std::min<size_t>(bytes - at, rng() % 4 == 0 ? 0 : rng() % (3 << 20));
    pieces.push_back(HostPiece{src.data() + at, n});
    at += n;
  }
  for (int threads : {1, 3, 4}) {
    SCOPED_TRACE(absl::StrCat(threads, " packing threads"));
    stream_.reset();  // the last round's stream goes before its backend
    backend_.reset();
    ASSERT_NO_FATAL_FAILURE(Open(CudaBackendOptions{.packing_threads = threads}));
    std::unique_ptr<Buffer> buf = Upload(std::vector<unsigned char>(bytes + 2 * guard, 0xEE));
    ASSERT_NE(buf, nullptr);
    BufferView middle(static_cast<char*>(buf->data()) + guard, bytes);
    absl::Status st = stream_->GatherToDevice(middle, pieces);
    ASSERT_TRUE(st.ok()) << st;
    std::vector<unsigned char> back(bytes + 2 * guard);
    st = stream_->CopyToHost(back.data(), *buf, back.size());
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(std::memcmp(back.data() + guard, src.data(), bytes), 0) << "gathered bytes differ";
    EXPECT_EQ(std::count(back.begin(), back.begin() + guard, 0xEE), static_cast<long>(guard))
        << "written before the destination";
    EXPECT_EQ(std::count(back.end() - guard, back.end(), 0xEE), static_cast<long>(guard))
        << "written past the destination";
  }
}

TEST_F(CudaBackendTest, PoolReusesFreedMemoryAndNeverHandsOutNull) {
  auto backend = MakeBackend();
  ASSERT_NE(backend, nullptr);
  auto zero = backend->Allocate(0);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_NE((*zero)->data(), nullptr);
  for (int i = 0; i < 200; ++i) {  // 200 x 64 MiB: only reuse keeps this in memory
    auto buf = backend->Allocate(64 << 20);
    ASSERT_TRUE(buf.ok()) << "allocation " << i << ": " << buf.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*buf)->data()) % 256, 0u);
  }
}

TEST_F(CudaBackendTest, PoisonFillsExactlyCountElementsWithNaN) {
  ASSERT_NO_FATAL_FAILURE(Open());
  for (DType dtype : kAllDTypes) {
    const size_t count = 100003, total = count + 64, es = ElementSize(dtype);
    std::vector<unsigned char> host(total * es);
    FillRandom(dtype, host.data(), total, 3);
    std::unique_ptr<Buffer> buf = Upload(host);
    ASSERT_NE(buf, nullptr);
    ASSERT_TRUE(stream_->Poison(*buf, dtype, count).ok());
    std::vector<unsigned char> back(total * es);
    ASSERT_TRUE(stream_->CopyToHost(back.data(), *buf, total * es).ok());
    for (size_t i = 0; i < count; ++i) {
      ASSERT_TRUE(std::isnan(LoadAsDouble(dtype, back.data(), i))) << DTypeName(dtype) << " " << i;
    }
    EXPECT_EQ(std::memcmp(back.data() + count * es, host.data() + count * es, 64 * es), 0)
        << DTypeName(dtype) << ": poison wrote past its count";
  }
}

TEST_F(CudaBackendTest, TimerReportsDeviceTimeOfEnqueuedWork) {
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_EQ(stream_->ElapsedSeconds().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(stream_->TimerStart().ok());
  ASSERT_TRUE(stream_->FlushCache().ok());  // a read pass over 2x L2: real device work
  ASSERT_TRUE(stream_->TimerStop().ok());
  absl::StatusOr<double> t = stream_->ElapsedSeconds();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GT(*t, 0.0);
  EXPECT_TRUE(std::isfinite(*t));
}

// A held sample times the device's work, not the host's delay in enqueuing it.
// The 3 ms the host spends between the timer's start and a tiny kernel stand for
// a slow launch (cuBLAS's cold path, a busy host): outside a held window, in an
// unheld one - what made identical cublasGemmEx calls differ by 15% in a race.
TEST_F(CudaBackendTest, AHeldTimerWindowHoldsTheKernelNotTheHostsDelayInEnqueuingIt) {
  ASSERT_NO_FATAL_FAILURE(Open());
  absl::StatusOr<std::unique_ptr<Buffer>> buf = backend_->Allocate(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE(stream_->Poison(**buf, DType::kF32, 1024).ok());  // the kernel loaded before timing
  ASSERT_TRUE(stream_->Synchronize().ok());
  const auto sample = [&](bool hold) -> double {
    if (hold) EXPECT_TRUE(stream_->HoldLaunches().ok());
    EXPECT_TRUE(stream_->TimerStart().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // the slow launch, not a wait
    EXPECT_TRUE(stream_->Poison(**buf, DType::kF32, 1024).ok());
    EXPECT_TRUE(stream_->TimerStop().ok());
    if (hold) EXPECT_TRUE(stream_->ReleaseLaunches().ok());
    absl::StatusOr<double> t = stream_->ElapsedSeconds();
    EXPECT_TRUE(t.ok()) << t.status();
    if (hold) EXPECT_FALSE(stream_->LastHoldExpired());
    return t.ok() ? *t : -1;
  };
  const double held = sample(true);
  const double unheld = sample(false);
  EXPECT_GT(held, 0.0);
  EXPECT_LT(held, 1e-3) << "the host's 3 ms entered the held window";
  EXPECT_GE(unheld, 3e-3) << "without a hold the window holds the host's delay";
}

// A Matmul reports the device time of its kernel, not of the host's launch
// before it: on an idle device an unheld timer would start at once and wait out
// the candidate's 3 ms on the host (cuBLAS's cold path, 10-100 us on the H200).
TEST_F(CudaBackendTest, ADispatchReportsItsKernelsTimeNotItsSlowLaunch) {
  ASSERT_NO_FATAL_FAILURE(Open());
  const Problem p{DType::kF32, 64, 48, 32};
  CandidateSpec spec;
  spec.name = "slow_launch";
  spec.version = 1;
  spec.tier = 1;
  MemberContract contract;
  contract.dtype = DType::kF32;
  contract.entry = "3 ms on the host, then a memset of C";
  contract.accuracy = {1e-5, 1e-6};
  contract.determinism = Determinism::kRunToRun;
  contract.arch = "sm_80+";
  spec.members.push_back({contract, [](const GemmArgs& args) -> absl::Status {
                            std::this_thread::sleep_for(std::chrono::milliseconds(3));
                            if (cudaMemsetAsync(args.c, 0, args.problem.c_bytes(),
                                                cuda::Resources(args.stream).stream) != cudaSuccess) {
                              return absl::InternalError("cudaMemsetAsync failed");
                            }
                            return absl::OkStatus();
                          }});
  std::vector<CandidateSpec> specs;
  specs.push_back(std::move(spec));
  absl::StatusOr<std::unique_ptr<Registry>> registry = Registry::Create(std::move(specs), *backend_);
  ASSERT_TRUE(registry.ok()) << registry.status();
  absl::StatusOr<std::unique_ptr<VerdictStore>> store = VerdictStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::unique_ptr<Quarantine>> quarantine =
      Quarantine::Create(**store, backend_->info().Fingerprint());
  ASSERT_TRUE(quarantine.ok()) << quarantine.status();
  {  // the memset's kernel loaded before any dispatch (a lazy load may wait for the device)
    absl::StatusOr<std::unique_ptr<Buffer>> warm = backend_->Allocate(p.c_bytes());
    ASSERT_TRUE(warm.ok()) << warm.status();
    ASSERT_EQ(cudaMemsetAsync((*warm)->data(), 0, p.c_bytes(), cuda::Resources(stream_.get()).stream),
              cudaSuccess);
    ASSERT_TRUE(stream_->Synchronize().ok());
  }
  auto* stream = dynamic_cast<CudaStream*>(stream_.get());
  ASSERT_NE(stream, nullptr);
  std::vector<std::unique_ptr<Stream>> streams;
  streams.push_back(std::move(stream_));
  StreamPool pool(std::move(streams), 1);
  VerdictCache cache(4);
  Dispatcher dispatcher(*backend_, pool, **quarantine, cache, /*verify_fraction=*/0.0);
  absl::StatusOr<Selection> chosen =
      SelectTierDefault(p, {(*registry)->Find("slow_launch")}, Determinism::kNondeterministic,
                        VerdictSource::kTierDefault, "test");
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  // Allocated first: the host-operand dispatches' buffers come from the pool
  // too, and recycled addresses would give their keys to these.
  absl::StatusOr<std::unique_ptr<Buffer>> da = backend_->Allocate(p.a_bytes()),
                                          db = backend_->Allocate(p.b_bytes()),
                                          dc = backend_->Allocate(p.c_bytes());
  ASSERT_TRUE(da.ok() && db.ok() && dc.ok());
  std::vector<float> a(p.m * p.k, 1.0f), b(p.k * p.n, 1.0f);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<DispatchResult> r =
        dispatcher.Run(p, *chosen, CallContext{}, a.data(), b.data());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->device_seconds, 0.0);
    EXPECT_LT(r->device_seconds, 1e-3) << "the host's 3 ms launch entered the reported device time";
  }
  // Operands on the device, named again and again: launched, recorded, then
  // replayed without a hold (the timer's events are in the graph); C written each time.
  DispatchIo io;
  io.a = Operand{.device = (*da)->data(), .bytes = p.a_bytes()};
  io.b = Operand{.device = (*db)->data(), .bytes = p.b_bytes()};
  io.c_device = (*dc)->data();
  const LaunchRecordings* recordings = stream->recordings();
  ASSERT_NE(recordings, nullptr);
  const int64_t replayed_before = recordings->counts().replayed;
  absl::StatusOr<std::unique_ptr<Stream>> helper = backend_->CreateStream();  // poisons and reads C
  ASSERT_TRUE(helper.ok()) << helper.status();
  std::vector<float> c(p.m * p.n);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE((*helper)->Poison(**dc, p.dtype, p.m * p.n).ok());
    ASSERT_TRUE((*helper)->Synchronize().ok());
    absl::StatusOr<DispatchResult> r = dispatcher.Run(p, *chosen, CallContext{}, io);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->device_seconds, 0.0) << "dispatch " << i;
    EXPECT_LT(r->device_seconds, 1e-3) << "dispatch " << i << ": the host's launch entered the device time";
    ASSERT_TRUE((*helper)->CopyToHost(c.data(), **dc, p.c_bytes()).ok());
    EXPECT_EQ(std::count(c.begin(), c.end(), 0.0f), static_cast<long>(c.size()))
        << "dispatch " << i << " left C unwritten";
  }
  EXPECT_EQ(recordings->counts().replayed - replayed_before, 2)
      << "the 3rd and 4th dispatch of the same operands replay the recording";
}

// A hold nobody releases (a launch that waits for the device, here the caller
// synchronizing inside it) ends by itself and says so; a released one does not.
TEST_F(CudaBackendTest, AHoldNeverReleasedEndsByItselfAndSaysSo) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_TRUE(stream_->HoldLaunches().ok());
  EXPECT_EQ(stream_->HoldLaunches().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(stream_->Synchronize().ok());  // returns: the hold expired
  EXPECT_TRUE(stream_->LastHoldExpired());
  ASSERT_TRUE(stream_->ReleaseLaunches().ok());

  ASSERT_TRUE(stream_->HoldLaunches().ok());
  EXPECT_EQ(stream_->FlushCache().code(), absl::StatusCode::kFailedPrecondition)
      << "the flush buffer's first allocation enqueued behind a hold";
  ASSERT_TRUE(stream_->ReleaseLaunches().ok());
  ASSERT_TRUE(stream_->Synchronize().ok());
  EXPECT_FALSE(stream_->LastHoldExpired());

  ASSERT_TRUE(stream_->FlushCache().ok());
  ASSERT_TRUE(stream_->HoldLaunches().ok());
  ASSERT_TRUE(stream_->FlushCache().ok());
  ASSERT_TRUE(stream_->ReleaseLaunches().ok());
  ASSERT_TRUE(stream_->Synchronize().ok());
  EXPECT_FALSE(stream_->LastHoldExpired());
}

std::vector<double> CpuReference(const Problem& p, const std::vector<unsigned char>& a,
                                 const std::vector<unsigned char>& b) {
  std::vector<double> ref(p.m * p.n);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < p.k; ++k) {
        acc = std::fma(LoadAsDouble(p.dtype, a.data(), i * p.k + k),
                       LoadAsDouble(p.dtype, b.data(), k * p.n + j), acc);
      }
      ref[i * p.n + j] = acc;
    }
  }
  return ref;
}

TEST_F(CudaBackendTest, DeviceReferenceMatchesCpuReferenceOnStoredOperands) {
  ASSERT_NO_FATAL_FAILURE(Open());
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 29}, {65, 67, 130}, {128, 64, 256}, {3, 200, 1000}};
  for (DType dtype : kAllDTypes) {
    for (const auto& s : shapes) {
      const Problem p{dtype, s[0], s[1], s[2]};
      SCOPED_TRACE(p.ToString());
      std::vector<unsigned char> a(p.a_bytes()), b(p.b_bytes());
      FillRandom(dtype, a.data(), p.m * p.k, 11);
      FillRandom(dtype, b.data(), p.k * p.n, 12);
      std::unique_ptr<Buffer> da = Upload(a), db = Upload(b);
      ASSERT_TRUE(da != nullptr && db != nullptr);
      std::vector<double> device;
      absl::Status st = stream_->Reference(p, *da, *db, &device);
      ASSERT_TRUE(st.ok()) << st;
      const std::vector<double> cpu = CpuReference(p, a, b);
      ASSERT_EQ(device.size(), cpu.size());
      double max_ref = 0;
      for (double v : cpu) max_ref = std::max(max_ref, std::fabs(v));
      for (size_t i = 0; i < cpu.size(); ++i) {
        // Both walk K in order with f64 FMAs: equal up to contraction choices.
        ASSERT_NEAR(device[i], cpu[i], 1e-12 * max_ref + 1e-300) << "element " << i;
      }
    }
  }
}

TEST_F(CudaBackendTest, DeviceReferenceRowsAreTheListedRowsOfTheWholeReference) {
  ASSERT_NO_FATAL_FAILURE(Open());
  for (DType dtype : kAllDTypes) {
    const Problem p{dtype, 300, 67, 130};
    SCOPED_TRACE(p.ToString());
    std::vector<unsigned char> a(p.a_bytes()), b(p.b_bytes());
    FillRandom(dtype, a.data(), p.m * p.k, 21);
    FillRandom(dtype, b.data(), p.k * p.n, 22);
    std::unique_ptr<Buffer> da = Upload(a), db = Upload(b);
    ASSERT_TRUE(da != nullptr && db != nullptr);
    std::vector<double> whole, some;
    ASSERT_TRUE(stream_->Reference(p, *da, *db, &whole).ok());
    // More rows than one 64-row tile of the kernel, out of order, first and last included.
    std::vector<int64_t> rows = SampledRows(p.m, 64);
    std::reverse(rows.begin(), rows.end());
    ASSERT_GT(rows.size(), 64u);
    absl::Status st = stream_->ReferenceRows(p, *da, *db, rows, &some);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(some.size(), rows.size() * p.n);
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int64_t j = 0; j < p.n; ++j) {
        ASSERT_EQ(some[r * p.n + j], whole[rows[r] * p.n + j]) << "row " << rows[r] << " col " << j;
      }
    }
    // The rows of C itself, copied back one by one.
    std::vector<unsigned char> rows_back(rows.size() * p.n * ElementSize(dtype));
    st = stream_->CopyRowsToHost(rows_back.data(), *db, p.n * ElementSize(dtype), {129, 0});
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(std::memcmp(rows_back.data(), b.data() + 129 * p.n * ElementSize(dtype),
                          p.n * ElementSize(dtype)),
              0);
  }
}

// The measurer's operands are filled on the device past the table size: the
// same values as the host fill (so a seed names the same operands everywhere),
// and nothing past `count`.
TEST_F(CudaBackendTest, RandomFillOnTheDeviceGivesTheHostFillsValues) {
  ASSERT_NO_FATAL_FAILURE(Open());
  for (DType dtype : kAllDTypes) {
    for (size_t count : {size_t{1000}, kRandomTableEntries, (size_t{3} << 20) + 7}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " x ", count));
      const size_t es = ElementSize(dtype), total = count + 16;
      std::vector<unsigned char> want(total * es, 0xab), back(total * es);
      FillRandom(dtype, want.data(), count, 17);
      std::unique_ptr<Buffer> buf = Upload(std::vector<unsigned char>(total * es, 0xab));
      ASSERT_NE(buf, nullptr);
      absl::Status st = stream_->FillRandom(*buf, dtype, count, 17);
      ASSERT_TRUE(st.ok()) << st;
      ASSERT_TRUE(stream_->CopyToHost(back.data(), *buf, back.size()).ok());
      EXPECT_EQ(std::memcmp(back.data(), want.data(), count * es), 0) << "values differ";
      EXPECT_EQ(std::memcmp(back.data() + count * es, want.data() + count * es, 16 * es), 0)
          << "the fill wrote past its count";
      EXPECT_FALSE(stream_->FillRandom(*buf, dtype, total + 1, 17).ok())
          << "a fill past the buffer must be refused";
    }
  }
}

// The oracle reads its rows in batches as large as the staging holds: several
// batches, runs of consecutive rows, rows out of order, and a row larger than
// the whole staging all come back as the listed rows, packed.
TEST_F(CudaBackendTest, RowsCopiedInBatchesAreTheListedRows) {
  CudaBackendOptions options;
  options.staging_bytes = 2 << 20;  // 1 MiB halves
  ASSERT_NO_FATAL_FAILURE(Open(options));
  for (size_t row_bytes : {size_t{300} << 10, size_t{3} << 20}) {  // 6 rows per batch; none
    SCOPED_TRACE(absl::StrCat("row of ", row_bytes, " bytes"));
    const int64_t m = 40;
    std::vector<unsigned char> src(m * row_bytes);
    std::mt19937 rng(3);
    for (size_t i = 0; i + 4 <= src.size(); i += 4) {
      const uint32_t word = rng();
      std::memcpy(src.data() + i, &word, 4);
    }
    std::unique_ptr<Buffer> buf = Upload(src);
    ASSERT_NE(buf, nullptr);
    const std::vector<int64_t> rows = {0, 1, 2, 3, 9, 20, 21, 5, 39, 38, 11};
    std::vector<unsigned char> back(rows.size() * row_bytes);
    absl::Status st = stream_->CopyRowsToHost(back.data(), *buf, row_bytes, rows);
    ASSERT_TRUE(st.ok()) << st;
    for (size_t r = 0; r < rows.size(); ++r) {
      EXPECT_EQ(std::memcmp(back.data() + r * row_bytes, src.data() + rows[r] * row_bytes,
                            row_bytes),
                0)
          << "packed row " << r << " (row " << rows[r] << ")";
    }
    EXPECT_FALSE(stream_->CopyRowsToHost(back.data(), *buf, row_bytes, {0, m}).ok())
        << "a row past the buffer must be refused";
  }
}

TEST_F(CudaBackendTest, DeviceCountsOfNonFiniteAndDifferingElementsAreExact) {
  ASSERT_NO_FATAL_FAILURE(Open());
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(DTypeName(dtype));
    const size_t count = (3 << 20) + 17;  // several blocks per SM, not a multiple of a warp
    const size_t elem = ElementSize(dtype);
    std::vector<unsigned char> host(count * elem);
    FillRandom(dtype, host.data(), count, 31);
    std::unique_ptr<Buffer> x = Upload(host), y = Upload(host);
    ASSERT_TRUE(x != nullptr && y != nullptr);
    EXPECT_EQ(stream_->CountNonFinite(*x, dtype, count).value(), 0);
    EXPECT_EQ(stream_->CountDifferences(*x, *y, dtype, count).value(), 0);
    ASSERT_TRUE(stream_->Poison(*x, dtype, 1000).ok());  // NaN in the first 1000
    StoreFromDouble(dtype, host.data(), count - 1, std::numeric_limits<double>::infinity());
    StoreFromDouble(dtype, host.data(), count - 2, -std::numeric_limits<double>::infinity());
    ASSERT_TRUE(stream_->CopyToDevice(*y, host.data(), host.size()).ok());
    EXPECT_EQ(stream_->CountNonFinite(*x, dtype, count).value(), 1000);
    EXPECT_EQ(stream_->CountNonFinite(*y, dtype, count).value(), 2);
    EXPECT_EQ(stream_->CountNonFinite(*x, dtype, 10).value(), 10);
    EXPECT_EQ(stream_->CountDifferences(*x, *y, dtype, count).value(), 1002);
  }
}

TEST_F(CudaBackendTest, SmClockIsReportedWhereNvmlIsThere) {
  auto backend = MakeBackend();
  ASSERT_NE(backend, nullptr);
  const std::optional<double> mhz = backend->SmClockMhz();
  if (!mhz) GTEST_SKIP() << "libnvidia-ml.so.1 not loadable here: the SM clock is not recorded";
  EXPECT_GT(*mhz, 100);
  EXPECT_LT(*mhz, 10000);
  std::printf("SM clock now: %.0f MHz\n", *mhz);
}

TEST_F(CudaBackendTest, StickyDeviceErrorMakesHealthReportTheCause) {
  // A fault destroys the context for the whole process: run it in a fresh child.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto backend = CudaBackend::Create({});
        if (!backend.ok()) std::_Exit(2);
        auto stream = (*backend)->CreateStream();
        if (!stream.ok()) std::_Exit(3);
        if (!(*backend)->Health().ok()) std::_Exit(4);
        testing::LaunchIllegalWrite(Resources(stream->get()).stream);
        const absl::Status sync = (*stream)->Synchronize();
        const absl::Status health = (*backend)->Health();
        std::fprintf(stderr, "sync: %s\nhealth: %s\n", sync.ToString().c_str(),
                     health.ToString().c_str());
        std::fflush(stderr);
        std::_Exit(!sync.ok() && !health.ok() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "health: .*sticky CUDA device error.*cudaErrorIllegalAddress");
}

}  // namespace
}  // namespace arbiter::cuda
