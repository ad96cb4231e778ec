// The CPU backend's Stream. Work runs synchronously on the calling thread (the
// kernels may fan out to their own threads and join before returning), so host
// wall time between TimerStart and TimerStop IS the device time of what ran in
// between: the timer is std::chrono::steady_clock, and Synchronize is a no-op.
//
// Owns a flush scratch of `flush_bytes`, allocated once, the first time
// FlushCache is called.
//
// Not thread-safe: one worker uses one stream at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/backend.h"

namespace arbiter::cpu {

class CpuStream final : public Stream {
 public:
  CpuStream(int threads, int64_t flush_bytes) : threads_(threads), flush_bytes_(flush_bytes) {}
  CpuStream(const CpuStream&) = delete;
  CpuStream& operator=(const CpuStream&) = delete;

  absl::Status CopyToDevice(Buffer& dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* dst, const Buffer& src, size_t bytes) override;
  absl::Status Poison(Buffer& buf, DType dtype, size_t count) override;
  absl::Status FlushCache() override;
  absl::Status TimerStart() override;
  absl::Status TimerStop() override;
  absl::StatusOr<double> ElapsedSeconds() override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  // Rows of C split over `threads` threads; each element sums k = 0..K-1 in
  // order in f64, so the result does not depend on the thread count.
  absl::Status Reference(const Problem& p, const Buffer& a, const Buffer& b,
                         std::vector<double>* c) override;
  // The listed rows of A gathered, then the same per-element sums as Reference.
  absl::Status ReferenceRows(const Problem& p, const Buffer& a, const Buffer& b,
                             const std::vector<int64_t>& rows, std::vector<double>* c) override;
  // The checks below read host memory in place: nothing is copied.
  absl::Status CopyRowsToHost(void* dst, const Buffer& src, size_t row_bytes,
                              const std::vector<int64_t>& rows) override;
  absl::StatusOr<int64_t> CountNonFinite(const Buffer& buf, DType dtype, size_t count) override;
  absl::StatusOr<int64_t> CountDifferences(const Buffer& x, const Buffer& y, DType dtype,
                                           size_t count) override;
  // Fills the buffer in place (it is host memory).
  absl::Status FillRandom(Buffer& buf, DType dtype, size_t count, uint64_t seed) override;

 private:
  using Clock = std::chrono::steady_clock;

  const int threads_;
  const int64_t flush_bytes_;
  std::vector<uint64_t> flush_scratch_;  // empty until the first FlushCache
  std::optional<Clock::time_point> start_;
  std::optional<Clock::time_point> stop_;
};

// The reference over host pointers (what CpuStream::Reference runs): C = A*B in
// f64 over the operands as stored, rows split over `threads` threads.
void HostReference(const Problem& p, const void* a, const void* b, int threads, double* c);

}  // namespace arbiter::cpu
