// The CPU backend: host memory, the calling thread as the "stream", and an
// f64-accumulated reference that is also the accuracy oracle on CPU. It is the
// embedded default and what CI exercises; its candidates are listed
// by kernels/registry/cpu_candidates.h.
//
// Thread-safe: immutable after Create; each stream it creates is used by one
// worker at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend.h"

namespace arbiter {

struct CpuBackendOptions {
  // Threads used by the reference, the cpu_blocked kernel and OpenBLAS's pool
  // (pinned at Create, so OpenBLAS splits work - and rounds - the same way on
  // every call); 0 = std::thread::hardware_concurrency().
  int threads = 0;
  // Bytes written and read by Stream::FlushCache to evict the last-level cache;
  // 0 = twice the detected last-level cache.
  int64_t flush_bytes = 0;
  // Where the CPU model name is read ("model name" line).
  std::string cpuinfo_path = "/proc/cpuinfo";
  // Where cache sizes are read (cpu0/cache/index*/{level,size}).
  std::string sysfs_cpu_dir = "/sys/devices/system/cpu";
};

class CpuBackend final : public Backend {
 public:
  // Last-level cache assumed where sysfs lists none (containers, some VMs).
  static constexpr int64_t kFallbackCacheBytes = int64_t{32} << 20;

  // INVALID_ARGUMENT for negative threads or flush_bytes.
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(const CpuBackendOptions& options);
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  const DeviceInfo& info() const override { return info_; }
  // Admits only the claim "cpu".
  std::string ArchitectureGap(const std::string& claim) const override;
  absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  // Host shared memory only: a sealed memfd (engine/host_region.h).
  std::vector<RegionKind> RegionKinds() const override { return {RegionKind::kHostMemfd}; }
  absl::StatusOr<std::unique_ptr<Buffer>> MapRegion(const RegionSource& source) override;

  int threads() const { return info_.multiprocessors; }

 private:
  CpuBackend(DeviceInfo info, int64_t flush_bytes)
      : info_(std::move(info)), flush_bytes_(flush_bytes) {}

  const DeviceInfo info_;
  const int64_t flush_bytes_;
};

}  // namespace arbiter
