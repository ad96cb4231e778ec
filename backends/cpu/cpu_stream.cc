#include "backends/cpu/cpu_stream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "engine/dtype.h"
#include "engine/load_as.h"
#include "engine/random_fill.h"

namespace arbiter::cpu {
namespace {

absl::Status CheckFits(const char* what, size_t bytes, const Buffer& buf) {
  if (bytes <= buf.bytes()) return absl::OkStatus();
  return absl::InvalidArgumentError(std::string("cpu: ") + what + " of " + std::to_string(bytes) +
                                    " bytes does not fit a buffer of " +
                                    std::to_string(buf.bytes()) + " bytes");
}

// Rows [row_begin, row_end) of C. B is widened a chunk of K rows at a time
// (about 1 MiB of doubles), and each C element accumulates k = 0..K-1 in order,
// so the chunking changes nothing but speed.
template <DType D>
void ReferenceRows(const Problem& p, const void* a, const void* b, int64_t row_begin,
                   int64_t row_end, double* c) {
  const int64_t n = p.n;
  const int64_t k = p.k;
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 17) / std::max<int64_t>(n, 1));
  std::vector<double> b_chunk(static_cast<size_t>(std::min(chunk, k) * n));
  std::fill(c + row_begin * n, c + row_end * n, 0.0);
  for (int64_t k0 = 0; k0 < k; k0 += chunk) {
    const int64_t k1 = std::min(k, k0 + chunk);
    for (int64_t kk = k0; kk < k1; ++kk) {
      for (int64_t j = 0; j < n; ++j) {
        b_chunk[(kk - k0) * n + j] = LoadAs<D>(b, static_cast<size_t>(kk * n + j));
      }
    }
    for (int64_t i = row_begin; i < row_end; ++i) {
      double* c_row = c + i * n;
      for (int64_t kk = k0; kk < k1; ++kk) {
        const double a_ik = LoadAs<D>(a, static_cast<size_t>(i * k + kk));
        const double* b_row = b_chunk.data() + (kk - k0) * n;
        for (int64_t j = 0; j < n; ++j) c_row[j] += a_ik * b_row[j];
      }
    }
  }
}

template <DType D>
void ReferenceParallel(const Problem& p, const void* a, const void* b, int threads, double* c) {
  const int64_t workers = std::clamp<int64_t>(threads, 1, std::max<int64_t>(p.m, 1));
  const int64_t rows_per = (p.m + workers - 1) / workers;
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < workers; ++w) {
    const int64_t begin = std::min(p.m, w * rows_per);
    const int64_t end = std::min(p.m, begin + rows_per);
    if (begin < end) pool.emplace_back(ReferenceRows<D>, std::cref(p), a, b, begin, end, c);
  }
  ReferenceRows<D>(p, a, b, 0, std::min(p.m, rows_per), c);
  for (std::thread& t : pool) t.join();
}

}  // namespace

void HostReference(const Problem& p, const void* a, const void* b, int threads, double* c) {
  switch (p.dtype) {
    case DType::kF32: return ReferenceParallel<DType::kF32>(p, a, b, threads, c);
    case DType::kF64: return ReferenceParallel<DType::kF64>(p, a, b, threads, c);
    case DType::kF16: return ReferenceParallel<DType::kF16>(p, a, b, threads, c);
    case DType::kBF16: return ReferenceParallel<DType::kBF16>(p, a, b, threads, c);
  }
}

absl::Status CpuStream::CopyToDevice(Buffer& dst, const void* src, size_t bytes) {
  RETURN_IF_ERROR(CheckFits("copy to device", bytes, dst));
  if (bytes > 0) std::memcpy(dst.data(), src, bytes);
  return absl::OkStatus();
}

absl::Status CpuStream::CopyToHost(void* dst, const Buffer& src, size_t bytes) {
  RETURN_IF_ERROR(CheckFits("copy to host", bytes, src));
  // Buffer::data() is non-const in the interface; reading through it changes nothing.
  if (bytes > 0) std::memcpy(dst, const_cast<Buffer&>(src).data(), bytes);
  return absl::OkStatus();
}

absl::Status CpuStream::Poison(Buffer& buf, DType dtype, size_t count) {
  RETURN_IF_ERROR(CheckFits("poison", count * ElementSize(dtype), buf));
  FillNaN(dtype, buf.data(), count);
  return absl::OkStatus();
}

absl::Status CpuStream::FlushCache() {
  if (flush_scratch_.empty()) {
    flush_scratch_.resize(static_cast<size_t>(std::max<int64_t>(flush_bytes_, 64)) /
                          sizeof(uint64_t));
    for (size_t i = 0; i < flush_scratch_.size(); ++i) flush_scratch_[i] = i;
  }
  // Read every line: the kernel's operands are replaced (their dirty lines
  // written back now, untimed) by clean lines, so the next timed run starts from
  // memory with nothing to write back - as the CUDA backend's read pass
  // (README, "Selection": a write pass leaves the cache dirty).
  uint64_t sum = 0;
  for (size_t i = 0; i < flush_scratch_.size(); i += 8) sum += flush_scratch_[i];
  volatile uint64_t sink = sum;
  (void)sink;
  return absl::OkStatus();
}

absl::Status CpuStream::TimerStart() {
  start_ = Clock::now();
  stop_.reset();
  return absl::OkStatus();
}

absl::Status CpuStream::TimerStop() {
  if (!start_) return absl::FailedPreconditionError("cpu: TimerStop without TimerStart");
  stop_ = Clock::now();
  return absl::OkStatus();
}

absl::StatusOr<double> CpuStream::ElapsedSeconds() {
  if (!start_ || !stop_) {
    return absl::FailedPreconditionError("cpu: ElapsedSeconds needs TimerStart then TimerStop");
  }
  return std::chrono::duration<double>(*stop_ - *start_).count();
}

absl::Status CpuStream::Reference(const Problem& p, const Buffer& a, const Buffer& b,
                                  std::vector<double>* c) {
  if (p.m < 1 || p.n < 1 || p.k < 1) {
    return absl::InvalidArgumentError("cpu: reference needs M, N, K >= 1, got " + p.ToString());
  }
  RETURN_IF_ERROR(CheckFits("reference operand A", p.a_bytes(), a));
  RETURN_IF_ERROR(CheckFits("reference operand B", p.b_bytes(), b));
  c->assign(static_cast<size_t>(p.m * p.n), 0.0);
  HostReference(p, const_cast<Buffer&>(a).data(), const_cast<Buffer&>(b).data(), threads_,
                c->data());
  return absl::OkStatus();
}

absl::Status CpuStream::ReferenceRows(const Problem& p, const Buffer& a, const Buffer& b,
                                     const std::vector<int64_t>& rows, std::vector<double>* c) {
  if (p.m < 1 || p.n < 1 || p.k < 1) {
    return absl::InvalidArgumentError("cpu: reference needs M, N, K >= 1, got " + p.ToString());
  }
  RETURN_IF_ERROR(CheckFits("reference operand A", p.a_bytes(), a));
  RETURN_IF_ERROR(CheckFits("reference operand B", p.b_bytes(), b));
  const size_t row_bytes = static_cast<size_t>(p.k) * ElementSize(p.dtype);
  std::vector<uint8_t> gathered(rows.size() * row_bytes);
  const auto* a_bytes = static_cast<const uint8_t*>(const_cast<Buffer&>(a).data());
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] < 0 || rows[r] >= p.m) {
      return absl::InvalidArgumentError("cpu: reference row " + std::to_string(rows[r]) +
                                        " outside M=" + std::to_string(p.m));
    }
    std::memcpy(gathered.data() + r * row_bytes, a_bytes + rows[r] * row_bytes, row_bytes);
  }
  Problem sub = p;
  sub.m = static_cast<int64_t>(rows.size());
  c->assign(rows.size() * static_cast<size_t>(p.n), 0.0);
  if (rows.empty()) return absl::OkStatus();
  HostReference(sub, gathered.data(), const_cast<Buffer&>(b).data(), threads_, c->data());
  return absl::OkStatus();
}

absl::Status CpuStream::CopyRowsToHost(void* dst, const Buffer& src, size_t row_bytes,
                                      const std::vector<int64_t>& rows) {
  const auto* from = static_cast<const uint8_t*>(const_cast<Buffer&>(src).data());
  for (size_t r = 0; r < rows.size(); ++r) {
    RETURN_IF_ERROR(CheckFits("copy rows to host", (rows[r] + 1) * row_bytes, src));
    std::memcpy(static_cast<uint8_t*>(dst) + r * row_bytes, from + rows[r] * row_bytes, row_bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CpuStream::CountNonFinite(const Buffer& buf, DType dtype, size_t count) {
  RETURN_IF_ERROR(CheckFits("count non-finite", count * ElementSize(dtype), buf));
  const void* data = const_cast<Buffer&>(buf).data();
  int64_t nonfinite = 0;
  for (size_t i = 0; i < count; ++i) nonfinite += !std::isfinite(LoadAsDouble(dtype, data, i));
  return nonfinite;
}

absl::StatusOr<int64_t> CpuStream::CountDifferences(const Buffer& x, const Buffer& y, DType dtype,
                                                    size_t count) {
  const size_t elem = ElementSize(dtype);
  RETURN_IF_ERROR(CheckFits("count differences", count * elem, x));
  RETURN_IF_ERROR(CheckFits("count differences", count * elem, y));
  const auto* px = static_cast<const uint8_t*>(const_cast<Buffer&>(x).data());
  const auto* py = static_cast<const uint8_t*>(const_cast<Buffer&>(y).data());
  int64_t differ = 0;
  for (size_t i = 0; i < count; ++i) differ += std::memcmp(px + i * elem, py + i * elem, elem) != 0;
  return differ;
}

absl::Status CpuStream::FillRandom(Buffer& buf, DType dtype, size_t count, uint64_t seed) {
  RETURN_IF_ERROR(CheckFits("random fill", count * ElementSize(dtype), buf));
  ::arbiter::FillRandom(dtype, buf.data(), count, seed);
  return absl::OkStatus();
}

}  // namespace arbiter::cpu
