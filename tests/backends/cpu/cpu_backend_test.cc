// CpuBackend: device description, architecture claims, host buffers, the
// stream's copies, poison, timer and the f64 reference.
#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/measurer.h"
#include "tests/backends/cpu/cpu_test_util.h"

namespace arbiter {
namespace {

std::unique_ptr<CpuBackend> MakeBackend(int threads = 2) {
  CpuBackendOptions options;
  options.threads = threads;
  auto backend = CpuBackend::Create(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(backend).value();
}

TEST(CpuBackendTest, DescribesTheHost) {
  const auto backend = MakeBackend(3);
  const DeviceInfo& info = backend->info();
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_EQ(info.arch, "cpu");
  EXPECT_FALSE(info.name.empty());
  EXPECT_EQ(info.compute_capability, 0);
  EXPECT_EQ(info.multiprocessors, 3);
  EXPECT_GT(info.cache_bytes, 0);
  ASSERT_TRUE(info.versions.count("openblas"));
  EXPECT_NE(info.versions.at("openblas").find("OpenBLAS"), std::string::npos)
      << info.versions.at("openblas");
  ASSERT_TRUE(info.versions.count("compiler"));
  EXPECT_FALSE(info.versions.at("compiler").empty());
}

TEST(CpuBackendTest, ZeroThreadsMeansHardwareConcurrency) {
  const auto backend = MakeBackend(0);
  // hardware_concurrency() may not know (0): then one thread.
  const int expected = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(backend->info().multiprocessors, expected);
}

TEST(CpuBackendTest, RefusesNegativeOptions) {
  CpuBackendOptions threads;
  threads.threads = -1;
  EXPECT_EQ(CpuBackend::Create(threads).status().code(), absl::StatusCode::kInvalidArgument);
  CpuBackendOptions flush;
  flush.flush_bytes = -1;
  EXPECT_EQ(CpuBackend::Create(flush).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuBackendTest, FingerprintIsStableAcrossCreate) {
  const auto first = MakeBackend(2);
  const auto second = MakeBackend(2);
  EXPECT_FALSE(first->info().Fingerprint().empty());
  EXPECT_EQ(first->info().Fingerprint(), second->info().Fingerprint());
}

TEST(CpuBackendTest, FingerprintChangesWithThreadCount) {
  // Threads change cpu_blocked's and OpenBLAS's timings: verdicts must not carry over.
  EXPECT_NE(MakeBackend(1)->info().Fingerprint(), MakeBackend(2)->info().Fingerprint());
}

TEST(CpuBackendTest, ArchitectureGapAdmitsOnlyCpu) {
  const auto backend = MakeBackend();
  EXPECT_EQ(backend->ArchitectureGap("cpu"), "");
  const std::string gap = backend->ArchitectureGap("sm_90a");
  EXPECT_NE(gap.find("sm_90a"), std::string::npos) << gap;
  EXPECT_NE(gap.find(backend->info().name), std::string::npos) << gap;
  EXPECT_NE(backend->ArchitectureGap("sm_80+"), "");
  EXPECT_NE(backend->ArchitectureGap(""), "");
}

TEST(CpuBackendTest, AllocatesAlignedBuffersOfTheAskedSize) {
  const auto backend = MakeBackend();
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{4096}, size_t{1} << 20}) {
    auto buffer = backend->Allocate(bytes);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_EQ((*buffer)->bytes(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*buffer)->data()) % 64, 0u) << bytes;
  }
}

TEST(CpuStreamTest, CopiesRoundTripAndRefuseOversize) {
  const auto backend = MakeBackend();
  auto stream = backend->CreateStream().value();
  auto buffer = backend->Allocate(16).value();
  const std::vector<uint8_t> in = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  ASSERT_TRUE(stream->CopyToDevice(*buffer, in.data(), in.size()).ok());
  std::vector<uint8_t> out(16);
  ASSERT_TRUE(stream->CopyToHost(out.data(), *buffer, out.size()).ok());
  EXPECT_EQ(in, out);
  std::vector<uint8_t> big(17);
  EXPECT_EQ(stream->CopyToDevice(*buffer, big.data(), big.size()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->CopyToHost(big.data(), *buffer, big.size()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CpuStreamTest, PoisonWritesNaNToExactlyCountElements) {
  const auto backend = MakeBackend();
  auto stream = backend->CreateStream().value();
  for (DType d : kAllDTypes) {
    auto buffer = backend->Allocate(8 * ElementSize(d)).value();
    for (size_t i = 0; i < 8; ++i) StoreFromDouble(d, buffer->data(), i, 1.5);
    ASSERT_TRUE(stream->Poison(*buffer, d, 5).ok());
    for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(std::isnan(LoadAsDouble(d, buffer->data(), i))) << d;
    for (size_t i = 5; i < 8; ++i) EXPECT_EQ(LoadAsDouble(d, buffer->data(), i), 1.5) << d;
    EXPECT_EQ(stream->Poison(*buffer, d, 9).code(), absl::StatusCode::kInvalidArgument) << d;
  }
}

TEST(CpuStreamTest, TimerNeedsStartThenStop) {
  const auto backend = MakeBackend();
  auto stream = backend->CreateStream().value();
  EXPECT_EQ(stream->ElapsedSeconds().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stream->TimerStop().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(stream->TimerStart().ok());
  EXPECT_EQ(stream->ElapsedSeconds().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(stream->TimerStop().ok());
  const auto elapsed = stream->ElapsedSeconds();
  ASSERT_TRUE(elapsed.ok()) << elapsed.status();
  EXPECT_GE(*elapsed, 0.0);
}

TEST(CpuStreamTest, FlushCacheLeavesBuffersIntact) {
  CpuBackendOptions options;
  options.flush_bytes = 1 << 20;
  auto backend = CpuBackend::Create(options).value();
  auto stream = backend->CreateStream().value();
  auto buffer = backend->Allocate(4).value();
  const uint32_t value = 0xdeadbeef;
  ASSERT_TRUE(stream->CopyToDevice(*buffer, &value, 4).ok());
  ASSERT_TRUE(stream->FlushCache().ok());
  ASSERT_TRUE(stream->FlushCache().ok());
  uint32_t out = 0;
  ASSERT_TRUE(stream->CopyToHost(&out, *buffer, 4).ok());
  EXPECT_EQ(out, value);
}

// The reference is the oracle: each element is the f64 sum over k = 0..K-1 in
// order of the stored operands - the same bits as the plainest loop, whatever
// the thread count.
TEST(CpuStreamTest, ReferenceIsTheInOrderF64SumOfTheStoredOperands) {
  for (DType d : kAllDTypes) {
    const Problem p{d, 17, 9, 300};
    const testing::Operands ops = testing::RandomOperands(p, 3);
    std::vector<double> expected(static_cast<size_t>(p.m * p.n));
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < p.k; ++k) {
          sum += LoadAsDouble(d, ops.a.data(), i * p.k + k) * LoadAsDouble(d, ops.b.data(), k * p.n + j);
        }
        expected[i * p.n + j] = sum;
      }
    }
    for (int threads : {1, 3}) {
      testing::CpuHarness harness(threads);
      const auto ref = harness.Reference(ops);
      ASSERT_TRUE(ref.ok()) << ref.status();
      EXPECT_EQ(*ref, expected) << d << " with " << threads << " threads";
    }
  }
}

TEST(CpuStreamTest, ReferenceRefusesOperandsSmallerThanTheProblem) {
  const auto backend = MakeBackend();
  auto stream = backend->CreateStream().value();
  const Problem p{DType::kF32, 4, 4, 4};
  auto a = backend->Allocate(p.a_bytes()).value();
  auto b = backend->Allocate(p.b_bytes() - 4).value();
  std::vector<double> ref;
  EXPECT_EQ(stream->Reference(p, *a, *b, &ref).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->Reference(p, *b, *a, &ref).code(), absl::StatusCode::kInvalidArgument);
}

// The measurer's sampled check reads these: the listed rows of the reference
// must be exactly those rows of the whole one, in the order listed.
TEST(CpuStreamTest, ReferenceRowsAreTheListedRowsOfTheWholeReference) {
  const auto backend = MakeBackend(3);
  auto stream = backend->CreateStream().value();
  for (DType d : kAllDTypes) {
    const Problem p{d, 37, 11, 90};
    std::vector<uint8_t> a(p.a_bytes()), b(p.b_bytes());
    FillRandom(d, a.data(), static_cast<size_t>(p.m * p.k), 4);
    FillRandom(d, b.data(), static_cast<size_t>(p.k * p.n), 5);
    auto da = backend->Allocate(p.a_bytes()).value();
    auto db = backend->Allocate(p.b_bytes()).value();
    ASSERT_TRUE(stream->CopyToDevice(*da, a.data(), a.size()).ok());
    ASSERT_TRUE(stream->CopyToDevice(*db, b.data(), b.size()).ok());
    std::vector<double> whole, some;
    ASSERT_TRUE(stream->Reference(p, *da, *db, &whole).ok());
    const std::vector<int64_t> rows = {36, 0, 17, 1};
    ASSERT_TRUE(stream->ReferenceRows(p, *da, *db, rows, &some).ok());
    ASSERT_EQ(some.size(), rows.size() * p.n);
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int64_t j = 0; j < p.n; ++j) {
        EXPECT_EQ(some[r * p.n + j], whole[rows[r] * p.n + j]) << d << " row " << rows[r];
      }
    }
    EXPECT_EQ(stream->ReferenceRows(p, *da, *db, {37}, &some).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// The measurer fills its operands through the stream: the values FillRandom
// gives on the host, below and past the table size, and nothing past `count`.
TEST(CpuStreamTest, RandomFillGivesTheHostFillsValuesAndStopsAtCount) {
  const auto backend = MakeBackend();
  auto stream = backend->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
    for (size_t count : {size_t{1000}, kRandomTableEntries, (size_t{1} << 20) + 7}) {
      const size_t es = ElementSize(dtype);
      std::vector<uint8_t> want(count * es);
      FillRandom(dtype, want.data(), count, 9);
      auto buf = backend->Allocate((count + 16) * es);
      ASSERT_TRUE(buf.ok()) << buf.status();
      std::memset((*buf)->data(), 0xab, (count + 16) * es);
      ASSERT_TRUE((*stream)->FillRandom(**buf, dtype, count, 9).ok());
      const auto* got = static_cast<const uint8_t*>((*buf)->data());
      EXPECT_EQ(std::memcmp(got, want.data(), want.size()), 0) << DTypeName(dtype) << " " << count;
      EXPECT_TRUE(std::all_of(got + count * es, got + (count + 16) * es,
                              [](uint8_t v) { return v == 0xab; }))
          << DTypeName(dtype) << ": the fill wrote past its count";
      EXPECT_FALSE((*stream)->FillRandom(**buf, dtype, count + 17, 9).ok())
          << "a fill past the buffer must be refused";
    }
  }
}

TEST(CpuStreamTest, CountsNonFiniteAndDifferingElementsInPlace) {
  const auto backend = MakeBackend();
  auto stream = backend->CreateStream().value();
  for (DType d : kAllDTypes) {
    const size_t count = 100;
    auto x = backend->Allocate(count * ElementSize(d)).value();
    auto y = backend->Allocate(count * ElementSize(d)).value();
    for (size_t i = 0; i < count; ++i) {
      StoreFromDouble(d, x->data(), i, 0.5 + static_cast<double>(i));
      StoreFromDouble(d, y->data(), i, 0.5 + static_cast<double>(i));
    }
    EXPECT_EQ(stream->CountNonFinite(*x, d, count).value(), 0) << d;
    EXPECT_EQ(stream->CountDifferences(*x, *y, d, count).value(), 0) << d;
    StoreFromDouble(d, x->data(), 3, std::numeric_limits<double>::infinity());
    FillNaN(d, static_cast<uint8_t*>(x->data()) + 70 * ElementSize(d), 2);
    StoreFromDouble(d, y->data(), 99, -1.0);
    EXPECT_EQ(stream->CountNonFinite(*x, d, count).value(), 3) << d;
    EXPECT_EQ(stream->CountNonFinite(*x, d, 50).value(), 1) << d;  // only the first 50
    EXPECT_EQ(stream->CountDifferences(*x, *y, d, count).value(), 4) << d;
    std::vector<uint8_t> rows(2 * 10 * ElementSize(d));
    ASSERT_TRUE(stream->CopyRowsToHost(rows.data(), *y, 10 * ElementSize(d), {9, 2}).ok());
    EXPECT_EQ(LoadAsDouble(d, rows.data(), 9), -1.0) << d;   // row 9's last element
    EXPECT_EQ(LoadAsDouble(d, rows.data(), 10), 20.5) << d;  // row 2's first
  }
}

}  // namespace
}  // namespace arbiter
