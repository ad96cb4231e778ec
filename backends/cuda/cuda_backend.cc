#include "backends/cuda/cuda_backend.h"

#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_regions.h"
#include "backends/cuda/cuda_shared_events.h"
#include "backends/cuda/cuda_stream.h"
#include "backends/cuda/cuda_uuid.h"
#include "backends/cuda/device_pool.h"
#include "backends/cuda/nvml_clock.h"

namespace arbiter::cuda {

struct CudaBackend::Impl {
  CudaBackendOptions options;
  cudaDeviceProp props = {};
  DeviceInfo info;
  std::shared_ptr<DevicePool> pool;
  std::unique_ptr<NvmlClock> clock;  // null where NVML is not available
};

namespace {

// 13000 -> "13.0": how CUDA encodes its versions (1000 * major + 10 * minor).
std::string CudaVersionText(int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); }

absl::StatusOr<std::string> CublasVersionText() {
  int major = 0, minor = 0, patch = 0;
  CUBLAS_RETURN_IF_ERROR(cublasGetProperty(MAJOR_VERSION, &major));
  CUBLAS_RETURN_IF_ERROR(cublasGetProperty(MINOR_VERSION, &minor));
  CUBLAS_RETURN_IF_ERROR(cublasGetProperty(PATCH_LEVEL, &patch));
  return absl::StrCat(major, ".", minor, ".", patch);
}

// "sm_80" -> 80; -1 when `text` is not "sm_<digits>".
int ParseSm(std::string_view text) {
  if (text.substr(0, 3) != "sm_") return -1;
  text.remove_prefix(3);
  if (text.empty() || text.size() > 4) return -1;
  int cc = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return -1;
    cc = cc * 10 + (ch - '0');
  }
  return cc > 0 ? cc : -1;
}

}  // namespace

int CudaBackend::VisibleDevices() {
  int count = 0;
  // No driver or no GPU answers an error code here (never a crash); both mean 0.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // Clears the error where the runtime allows it (no GPU); without a driver
    // every later call fails the same way, and the daemon makes none.
    cudaGetLastError();
    return 0;
  }
  return count;
}

absl::StatusOr<int> CudaBackend::FindDevice(const std::string& uuid) {
  std::vector<std::string> seen;
  for (int d = 0; d < VisibleDevices(); ++d) {
    cudaDeviceProp props;
    CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, d));
    std::string text = UuidText(props.uuid);
    if (text == uuid) return d;
    seen.push_back(absl::StrCat(d, ": ", text));
  }
  return absl::NotFoundError(absl::StrCat("device: no visible GPU has UUID ", uuid, " (visible: ",
                                          seen.empty() ? "none" : absl::StrJoin(seen, ", "), ")"));
}

std::string CudaBackend::ArchitectureGapFor(const std::string& claim, int cc) {
  const std::string device = absl::StrCat("sm_", cc);
  if (claim == "cpu") return absl::StrCat("claim \"cpu\": this is a CUDA device (", device, ")");
  std::string_view text = claim;
  if (!text.empty() && text.back() == '+') {
    text.remove_suffix(1);
    const int min = ParseSm(text);
    if (min < 0) return absl::StrCat("unrecognized architecture claim \"", claim, "\"");
    if (cc >= min) return "";
    return absl::StrCat("claim \"", claim, "\" needs compute capability >= ", min, ", device is ",
                        device);
  }
  // "sm_90a": arch-specific instructions (wgmma, setmaxnreg) run on exactly that chip.
  if (!text.empty() && text.back() == 'a') text.remove_suffix(1);
  const int exact = ParseSm(text);
  if (exact < 0) return absl::StrCat("unrecognized architecture claim \"", claim, "\"");
  if (cc == exact) return "";
  return absl::StrCat("claim \"", claim, "\" runs on ", "sm_", exact, " only, device is ", device);
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  const int visible = VisibleDevices();
  if (options.device < 0 || options.device >= visible) {
    return absl::UnavailableError(absl::StrCat("CUDA device ", options.device,
                                               " requested, ", visible, " visible"));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  CUDA_RETURN_IF_ERROR(cudaFree(nullptr));  // creates the primary context now, not at first use
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&impl->props, options.device));
  int driver = 0, runtime = 0;
  CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&driver));
  CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&runtime));
  ASSIGN_OR_RETURN(std::string cublas, CublasVersionText());

  DeviceInfo& info = impl->info;
  const cudaDeviceProp& p = impl->props;
  info.backend = "cuda";
  info.name = p.name;
  info.compute_capability = p.major * 10 + p.minor;
  info.arch = absl::StrCat("sm_", info.compute_capability);
  info.multiprocessors = p.multiProcessorCount;
  info.cache_bytes = p.l2CacheSize;
  info.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
  info.uuid = UuidText(p.uuid);
  // The kernel driver build (580.x) changes cuBLAS heuristics and clocks policy; the CUDA
  // API level it supports (13.0) alone would let two driver builds share verdicts.
  std::string proc_text;
  if (std::FILE* f = std::fopen("/proc/driver/nvidia/version", "r")) {
    char buf[512];
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    proc_text.assign(buf, n);
  }
  const std::string kernel_driver = KernelDriverVersion(proc_text);
  info.versions["driver"] = kernel_driver.empty() ? "unknown" : kernel_driver;
  info.versions["driver_api"] = CudaVersionText(driver);
  info.versions["runtime"] = CudaVersionText(runtime);
  info.versions["cublas"] = cublas;
  info.versions["cublaslt"] = absl::StrCat(cublasLtGetVersion());

  ASSIGN_OR_RETURN(impl->pool, DevicePool::Create(options.device, options.pool_release_threshold));
  std::string no_clock;
  impl->clock = NvmlClock::Open(info.uuid, &no_clock);
  if (impl->clock == nullptr) {
    spdlog::info("the SM clock will not be recorded in verdicts: {}", no_clock);
  }
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(impl)));
}

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaBackend::~CudaBackend() = default;

const DeviceInfo& CudaBackend::info() const { return impl_->info; }
const CudaBackendOptions& CudaBackend::options() const { return impl_->options; }

std::string CudaBackend::KernelDriverVersion(const std::string& proc_text) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..." or, for the open
  // modules, "... Open Kernel Module for x86_64  570.86.15  ...": the first dotted number
  // after "Kernel Module" on the first line.
  const size_t line_end = proc_text.find('\n');
  const std::string line = proc_text.substr(0, line_end);
  size_t pos = line.find("Kernel Module");
  while (pos != std::string::npos && pos < line.size()) {
    const size_t start = line.find_first_of("0123456789", pos);
    if (start == std::string::npos) return "";
    const size_t end = line.find_first_not_of("0123456789.", start);
    const std::string token = line.substr(start, (end == std::string::npos ? line.size() : end) - start);
    const bool whole_word = (start == 0 || line[start - 1] == ' ') &&
                            (end == std::string::npos || line[end] == ' ');
    if (whole_word && token.find('.') != std::string::npos) return token;
    pos = end;
  }
  return "";
}

std::string CudaBackend::ArchitectureGap(const std::string& claim) const {
  return ArchitectureGapFor(claim, impl_->info.compute_capability);
}

absl::StatusOr<std::unique_ptr<Buffer>> CudaBackend::Allocate(size_t bytes) {
  RETURN_IF_ERROR(StickyError());
  return impl_->pool->Allocate(bytes);
}

absl::StatusOr<std::unique_ptr<Stream>> CudaBackend::CreateStream() {
  RETURN_IF_ERROR(StickyError());
  ASSIGN_OR_RETURN(std::unique_ptr<CudaStream> s,
                   CudaStream::Create(impl_->pool, impl_->props, impl_->options));
  return std::unique_ptr<Stream>(std::move(s));
}

absl::StatusOr<std::unique_ptr<Buffer>> CudaBackend::MapRegion(const RegionSource& source) {
  RETURN_IF_ERROR(StickyError());
  const size_t bytes = static_cast<size_t>(source.bytes);
  switch (source.kind) {
    case RegionKind::kCudaVmmFd:
      return MapVmmFd(impl_->options.device, source.fd, bytes);
    case RegionKind::kCudaIpc:
      return MapIpcHandle(impl_->options.device, source.ipc_handle, bytes);
    case RegionKind::kHostMemfd:
      return MapHostMemfd(impl_->options.device, source.fd, bytes);
  }
  return absl::UnimplementedError(absl::StrCat(
      "the cuda backend maps REGION_KIND_CUDA_VMM_FD, REGION_KIND_CUDA_IPC and "
      "REGION_KIND_HOST_MEMFD, not ", RegionKindName(source.kind)));
}

absl::StatusOr<std::unique_ptr<SharedEvents>> CudaBackend::CreateSharedEvents(size_t count) {
  RETURN_IF_ERROR(StickyError());
  return CreateCudaSharedEvents(impl_->options.device, count);
}

std::optional<double> CudaBackend::SmClockMhz() const {
  if (impl_->clock == nullptr) return std::nullopt;
  return impl_->clock->SmMhz();
}

HostAllocator CudaBackend::host_allocator() const {
  HostAllocator allocator;
  // The device, not the backend: buffers may be freed after the backend is gone.
  allocator.allocate = [device = impl_->options.device](size_t bytes) -> void* {
    void* data = nullptr;
    // Current device first: otherwise the runtime would create a context on device 0.
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaHostAlloc(&data, bytes, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();  // out of page-locked memory is not a broken context
      return nullptr;
    }
    return data;
  };
  allocator.free = [](void* data) { cudaFreeHost(data); };
  return allocator;
}

absl::Status CudaBackend::Health() const {
  RETURN_IF_ERROR(StickyError());
  // A fault no checked call has seen yet still shows on any stream query.
  RETURN_IF_ERROR(impl_->pool->Probe());
  return StickyError();
}

}  // namespace arbiter::cuda
