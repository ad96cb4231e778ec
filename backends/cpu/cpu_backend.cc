#include "backends/cpu/cpu_backend.h"

#include <cblas.h>

#include <unistd.h>

#include <thread>

#include "backends/cpu/cpu_probe.h"
#include "backends/cpu/cpu_stream.h"
#include "backends/cpu/host_buffer.h"
#include "engine/host_region.h"
#include "absl/strings/str_cat.h"

namespace arbiter {

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const CpuBackendOptions& options) {
  if (options.threads < 0) {
    return absl::InvalidArgumentError("cpu: threads must be >= 0 (0 = hardware concurrency), got " +
                                      std::to_string(options.threads));
  }
  if (options.flush_bytes < 0) {
    return absl::InvalidArgumentError("cpu: flush_bytes must be >= 0 (0 = 2x last-level cache), got " +
                                      std::to_string(options.flush_bytes));
  }
  int threads = options.threads;
  if (threads == 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;  // hardware_concurrency may not know

  DeviceInfo info;
  info.backend = "cpu";
  info.name = cpu::ReadCpuModelName(options.cpuinfo_path).value_or("unknown cpu");
  info.arch = "cpu";
  info.multiprocessors = threads;
  info.cache_bytes =
      cpu::ReadLastLevelCacheBytes(options.sysfs_cpu_dir).value_or(kFallbackCacheBytes);
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_bytes > 0) info.memory_bytes = static_cast<int64_t>(pages) * page_bytes;
  // The OpenBLAS config names the core kernels it picked at load (DYNAMIC_ARCH),
  // so a different code path on another CPU gets another fingerprint.
  info.versions["openblas"] = openblas_get_config();
  info.versions["compiler"] = __VERSION__;

  // OpenBLAS partitions a GEMM by its thread count; a fixed count keeps the
  // openblas candidate's output run-to-run identical.
  openblas_set_num_threads(threads);

  const int64_t flush_bytes =
      options.flush_bytes > 0 ? options.flush_bytes : 2 * info.cache_bytes;
  return std::unique_ptr<CpuBackend>(new CpuBackend(std::move(info), flush_bytes));
}

std::string CpuBackend::ArchitectureGap(const std::string& claim) const {
  if (claim == "cpu") return "";
  return "architecture claim '" + claim + "' does not admit " + info_.name +
         " (cpu backend admits only 'cpu')";
}

absl::StatusOr<std::unique_ptr<Buffer>> CpuBackend::Allocate(size_t bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<cpu::HostBuffer> buffer, cpu::HostBuffer::Create(bytes));
  return std::unique_ptr<Buffer>(std::move(buffer));
}

absl::StatusOr<std::unique_ptr<Buffer>> CpuBackend::MapRegion(const RegionSource& source) {
  if (source.kind != RegionKind::kHostMemfd) {
    return absl::UnimplementedError(absl::StrCat("the cpu backend maps host shared memory only "
                                                 "(REGION_KIND_HOST_MEMFD), not ",
                                                 RegionKindName(source.kind)));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<HostRegion> region,
                   HostRegion::Map(source.fd, static_cast<size_t>(source.bytes)));
  return std::unique_ptr<Buffer>(std::move(region));
}

absl::StatusOr<std::unique_ptr<Stream>> CpuBackend::CreateStream() {
  return std::unique_ptr<Stream>(new cpu::CpuStream(info_.multiprocessors, flush_bytes_));
}

}  // namespace arbiter
