#include "backends/cuda/cuda_regions.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_check.h"
#include "engine/host_region.h"

namespace arbiter::cuda {
namespace {

// The driver entry points regions need, resolved once through the runtime.
struct Driver {
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuMemImportFromShareableHandle) import = nullptr;
  decltype(&::cuMemGetAllocationPropertiesFromHandle) properties = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemAddressFree) free = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemGetAddressRange) address_range = nullptr;
  absl::Status status;
};

template <typename Fn>
absl::Status Resolve(const char* symbol, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // 12000: the driver ABI these declarations (cuda.h of CUDA 12+) describe.
  const cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    return absl::UnavailableError(absl::StrCat("the CUDA driver offers no ", symbol, " (",
                                               cudaGetErrorName(err), ")"));
  }
  *fn = reinterpret_cast<Fn>(p);
  return absl::OkStatus();
}

const Driver& GetDriver() {
  static const Driver driver = [] {
    Driver d;
    d.status = [&]() -> absl::Status {
      RETURN_IF_ERROR(Resolve("cuGetErrorName", &d.get_error_name));
      RETURN_IF_ERROR(Resolve("cuMemImportFromShareableHandle", &d.import));
      RETURN_IF_ERROR(Resolve("cuMemGetAllocationPropertiesFromHandle", &d.properties));
      RETURN_IF_ERROR(Resolve("cuMemGetAllocationGranularity", &d.granularity));
      RETURN_IF_ERROR(Resolve("cuMemAddressReserve", &d.reserve));
      RETURN_IF_ERROR(Resolve("cuMemAddressFree", &d.free));
      RETURN_IF_ERROR(Resolve("cuMemMap", &d.map));
      RETURN_IF_ERROR(Resolve("cuMemUnmap", &d.unmap));
      RETURN_IF_ERROR(Resolve("cuMemSetAccess", &d.set_access));
      RETURN_IF_ERROR(Resolve("cuMemRelease", &d.release));
      RETURN_IF_ERROR(Resolve("cuMemGetAddressRange", &d.address_range));
      return absl::OkStatus();
    }();
    return d;
  }();
  return driver;
}

// "cuMemMap failed: CUDA_ERROR_INVALID_VALUE"; FAILED_PRECONDITION (the client's
// memory is not what it claimed), or the runtime's code for out-of-memory.
absl::Status DriverStatus(const Driver& d, CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = "unknown";
  d.get_error_name(r, &name);
  const std::string message = absl::StrCat(call, " failed: ", name);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return absl::ResourceExhaustedError(message);
  return absl::FailedPreconditionError(message);
}

#define DRIVER_RETURN_IF_ERROR(d, call) RETURN_IF_ERROR(DriverStatus((d), (call), #call))

// A VMM mapping: the reserved range, mapped to the imported allocation.
class VmmRegion final : public Buffer {
 public:
  VmmRegion(int device, CUdeviceptr base, size_t mapped, size_t bytes)
      : device_(device), base_(base), mapped_(mapped), bytes_(bytes) {}
  ~VmmRegion() override {
    const Driver& d = GetDriver();
    cudaSetDevice(device_);
    d.unmap(base_, mapped_);
    d.free(base_, mapped_);
  }
  void* data() override { return reinterpret_cast<void*>(base_); }
  size_t bytes() const override { return bytes_; }

 private:
  const int device_;
  const CUdeviceptr base_;
  const size_t mapped_;
  const size_t bytes_;
};

// A client's memfd mapped here and page-locked, so copies between it and the
// device run at the bus's rate with no staging; the kernels never address it.
class PinnedHostRegion final : public Buffer {
 public:
  PinnedHostRegion(int device, std::unique_ptr<HostRegion> mapped)
      : device_(device), mapped_(std::move(mapped)) {}
  ~PinnedHostRegion() override {
    cudaSetDevice(device_);
    cudaHostUnregister(mapped_->data());  // before the mapping goes
    cudaGetLastError();
  }
  void* data() override { return mapped_->data(); }
  size_t bytes() const override { return mapped_->bytes(); }
  bool host_side() const override { return true; }

 private:
  const int device_;
  const std::unique_ptr<HostRegion> mapped_;
};

// Handles opened in this process, by their bytes: CUDA opens each once.
struct OpenedIpc {
  void* base = nullptr;
  int users = 0;
};
std::mutex ipc_mu;
std::map<std::string, OpenedIpc>& IpcOpened() {
  static auto* opened = new std::map<std::string, OpenedIpc>;  // guarded by ipc_mu
  return *opened;
}

class IpcRegion final : public Buffer {
 public:
  IpcRegion(int device, std::string handle, void* base, size_t bytes)
      : device_(device), handle_(std::move(handle)), base_(base), bytes_(bytes) {}
  ~IpcRegion() override {
    std::lock_guard<std::mutex> lock(ipc_mu);
    auto it = IpcOpened().find(handle_);
    if (it != IpcOpened().end() && --it->second.users == 0) {
      cudaSetDevice(device_);
      cudaIpcCloseMemHandle(it->second.base);
      IpcOpened().erase(it);
    }
  }
  void* data() override { return base_; }
  size_t bytes() const override { return bytes_; }

 private:
  const int device_;
  const std::string handle_;
  void* const base_;
  const size_t bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Buffer>> MapVmmFd(int device, int fd, size_t bytes) {
  const Driver& d = GetDriver();
  RETURN_IF_ERROR(d.status);
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  CUmemGenericAllocationHandle handle = 0;
  DRIVER_RETURN_IF_ERROR(
      d, d.import(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  // The imported handle is released whatever happens; a mapping keeps its own reference.
  struct Release {
    const Driver& d;
    CUmemGenericAllocationHandle h;
    ~Release() { d.release(h); }
  } release{d, handle};
  CUmemAllocationProp prop = {};
  DRIVER_RETURN_IF_ERROR(d, d.properties(&prop, handle));
  if (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop.location.id != device) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fd: the allocation is on ", prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? "device " : "location ",
        prop.location.id, "; this daemon serves device ", device, " (expected memory on its GPU)"));
  }
  size_t granularity = 0;
  DRIVER_RETURN_IF_ERROR(d, d.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (granularity == 0) granularity = 2 << 20;
  const size_t mapped = (bytes + granularity - 1) / granularity * granularity;
  CUdeviceptr base = 0;
  DRIVER_RETURN_IF_ERROR(d, d.reserve(&base, mapped, granularity, 0, 0));
  if (CUresult r = d.map(base, mapped, 0, handle, 0); r != CUDA_SUCCESS) {
    d.free(base, mapped);
    return absl::InvalidArgumentError(absl::StrCat(
        "bytes: ", bytes, " registered (", mapped, " mapped at the allocation granularity of ",
        granularity, "), but cuMemMap refused them: expected at most the exported allocation's size (",
        DriverStatus(d, r, "cuMemMap").message(), ")"));
  }
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = d.set_access(base, mapped, &access, 1); r != CUDA_SUCCESS) {
    d.unmap(base, mapped);
    d.free(base, mapped);
    return DriverStatus(d, r, "cuMemSetAccess");
  }
  return std::unique_ptr<Buffer>(new VmmRegion(device, base, mapped, bytes));
}

absl::StatusOr<std::unique_ptr<Buffer>> MapIpcHandle(int device, const std::string& handle,
                                                     size_t bytes) {
  if (handle.size() != sizeof(cudaIpcMemHandle_t)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_ipc_handle: expected ",
                                                   sizeof(cudaIpcMemHandle_t),
                                                   " bytes (cudaIpcMemHandle_t), got ", handle.size()));
  }
  const Driver& d = GetDriver();
  RETURN_IF_ERROR(d.status);
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  void* base = nullptr;
  {
    std::lock_guard<std::mutex> lock(ipc_mu);
    OpenedIpc& opened = IpcOpened()[handle];
    if (opened.users == 0) {
      cudaIpcMemHandle_t h;
      std::memcpy(&h, handle.data(), sizeof h);
      const cudaError_t err = cudaIpcOpenMemHandle(&opened.base, h, cudaIpcMemLazyEnablePeerAccess);
      if (err != cudaSuccess) {
        IpcOpened().erase(handle);
        cudaGetLastError();  // not sticky: a bad handle leaves the context usable
        return absl::FailedPreconditionError(absl::StrCat(
            "cuda_ipc_handle: cudaIpcOpenMemHandle failed: ", cudaGetErrorName(err), " (",
            cudaGetErrorString(err), "); expected a live cudaIpcGetMemHandle of memory on this GPU"));
      }
    }
    ++opened.users;
    base = opened.base;
  }
  // From here a failed check closes the handle again, through the region's destructor.
  std::unique_ptr<Buffer> region(new IpcRegion(device, handle, base, bytes));
  cudaPointerAttributes attributes = {};
  if (cudaPointerGetAttributes(&attributes, base) != cudaSuccess ||
      attributes.type != cudaMemoryTypeDevice || attributes.device != device) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda_ipc_handle: the memory is on device ", attributes.device,
        "; this daemon serves device ", device, " (expected memory on its GPU)"));
  }
  CUdeviceptr alloc_base = 0;
  size_t alloc_size = 0;
  DRIVER_RETURN_IF_ERROR(
      d, d.address_range(&alloc_base, &alloc_size, reinterpret_cast<CUdeviceptr>(base)));
  const size_t available = alloc_size - (reinterpret_cast<CUdeviceptr>(base) - alloc_base);
  if (bytes > available) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bytes: ", bytes, " registered, the allocation behind the handle holds ", available,
        " (expected at most that)"));
  }
  return region;
}

absl::StatusOr<std::unique_ptr<Buffer>> MapHostMemfd(int device, int fd, size_t bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<HostRegion> mapped, HostRegion::Map(fd, bytes));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  if (const cudaError_t err = cudaHostRegister(mapped->data(), bytes, cudaHostRegisterPortable);
      err != cudaSuccess) {
    cudaGetLastError();  // not sticky: the context stays usable
    const std::string message =
        absl::StrCat("fd: cudaHostRegister of ", bytes, " bytes failed: ", cudaGetErrorName(err),
                     " (", cudaGetErrorString(err), ")");
    if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
    return absl::FailedPreconditionError(message);
  }
  return std::unique_ptr<Buffer>(new PinnedHostRegion(device, std::move(mapped)));
}

}  // namespace arbiter::cuda
