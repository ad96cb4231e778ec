// GPU operands for arbiterctl's --operands device on a CUDA daemon: memory on
// the daemon's GPU, shared by legacy IPC handle (cudaMalloc + cudaIpcGetMemHandle)
// or as a CUDA VMM allocation exported as a POSIX fd (cuMemCreate +
// cuMemExportToShareableHandle, passed over the session). Driver calls go
// through cudaGetDriverEntryPointByVersion so arbiterctl starts without a driver.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>

#include "backends/cuda/cuda_uuid.h"
#include "client/device_operands.h"

namespace arbiter::client {
namespace {

grpc::Status CudaError(const char* call, cudaError_t err) {
  return grpc::Status(grpc::StatusCode::INTERNAL,
                      std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                          cudaGetErrorString(err) + ")");
}

#define CTL_CUDA(call)                                                     \
  do {                                                                     \
    if (const cudaError_t err_ = (call); err_ != cudaSuccess) return CudaError(#call, err_); \
  } while (0)

}  // namespace

grpc::Status FindCudaDevice(const std::string& uuid, int* device) {
  int count = 0;
  CTL_CUDA(cudaGetDeviceCount(&count));
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    CTL_CUDA(cudaGetDeviceProperties(&p, d));
    if (uuid.empty() || cuda::UuidText(p.uuid) == uuid) {
      *device = d;
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "the daemon's GPU " + uuid + " is not visible to arbiterctl (" +
                          std::to_string(count) + " GPUs visible; regions need the same GPU)");
}

namespace {

template <typename Fn>
grpc::Status Resolve(const char* symbol, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        std::string("the CUDA driver offers no ") + symbol);
  }
  *fn = reinterpret_cast<Fn>(p);
  return grpc::Status::OK;
}

grpc::Status DriverError(const char* call, CUresult r) {
  return grpc::Status(grpc::StatusCode::INTERNAL,
                      std::string(call) + " failed: CUresult " + std::to_string(static_cast<int>(r)));
}

class CudaOperands final : public DeviceOperands {
 public:
  ~CudaOperands() override {
    cudaSetDevice(device_);
    if (vmm_) {
      if (fd_ >= 0) close(fd_);
      if (base_ != 0) {
        unmap_(base_, mapped_);
        free_(base_, mapped_);
      }
      if (handle_ != 0) release_(handle_);
    } else if (ptr_ != nullptr) {
      cudaFree(ptr_);
    }
  }

  static grpc::Status Create(const std::string& uuid, bool vmm, size_t bytes,
                             std::unique_ptr<DeviceOperands>* out) {
    std::unique_ptr<CudaOperands> o(new CudaOperands);
    if (grpc::Status s = FindCudaDevice(uuid, &o->device_); !s.ok()) return s;
    CTL_CUDA(cudaSetDevice(o->device_));
    o->bytes_ = bytes;
    o->vmm_ = vmm;
    if (!vmm) {
      CTL_CUDA(cudaMalloc(&o->ptr_, bytes));
      *out = std::move(o);
      return grpc::Status::OK;
    }
    if (grpc::Status s = o->AllocateVmm(); !s.ok()) return s;
    *out = std::move(o);
    return grpc::Status::OK;
  }

  grpc::Status Write(size_t offset, const std::string& bytes) override {
    CTL_CUDA(cudaSetDevice(device_));
    CTL_CUDA(cudaMemcpy(static_cast<char*>(data()) + offset, bytes.data(), bytes.size(),
                        cudaMemcpyHostToDevice));
    return grpc::Status::OK;
  }
  grpc::Status Read(size_t offset, size_t bytes, std::string* out) override {
    CTL_CUDA(cudaSetDevice(device_));
    out->resize(bytes);
    CTL_CUDA(cudaMemcpy(out->data(), static_cast<const char*>(data()) + offset, bytes,
                        cudaMemcpyDeviceToHost));
    return grpc::Status::OK;
  }
  grpc::Status Register(ArbiterClient& client, const std::string& label,
                        v1::Region* region) override {
    if (vmm_) {
      return client.RegisterFd(fd_, v1::REGION_KIND_CUDA_VMM_FD, static_cast<int64_t>(bytes_),
                               label, region);
    }
    cudaIpcMemHandle_t handle;
    CTL_CUDA(cudaIpcGetMemHandle(&handle, ptr_));
    v1::RegisterRegionRequest request;
    request.set_kind(v1::REGION_KIND_CUDA_IPC);
    request.set_bytes(static_cast<int64_t>(bytes_));
    request.set_cuda_ipc_handle(reinterpret_cast<const char*>(&handle), sizeof handle);
    request.set_label(label);
    return client.RegisterRegion(request, region);
  }
  const char* kind_name() const override { return vmm_ ? "vmm" : "ipc"; }

 private:
  CudaOperands() = default;
  void* data() const { return vmm_ ? reinterpret_cast<void*>(base_) : ptr_; }

  grpc::Status AllocateVmm() {
    decltype(&::cuMemCreate) create = nullptr;
    decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
    decltype(&::cuMemAddressReserve) reserve = nullptr;
    decltype(&::cuMemSetAccess) set_access = nullptr;
    decltype(&::cuMemExportToShareableHandle) export_handle = nullptr;
    for (grpc::Status s : {Resolve("cuMemCreate", &create),
                           Resolve("cuMemGetAllocationGranularity", &granularity),
                           Resolve("cuMemAddressReserve", &reserve), Resolve("cuMemMap", &map_),
                           Resolve("cuMemSetAccess", &set_access),
                           Resolve("cuMemExportToShareableHandle", &export_handle),
                           Resolve("cuMemUnmap", &unmap_), Resolve("cuMemAddressFree", &free_),
                           Resolve("cuMemRelease", &release_)}) {
      if (!s.ok()) return s;
    }
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device_;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t grain = 0;
    if (CUresult r = granularity(&grain, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM); r != CUDA_SUCCESS) {
      return DriverError("cuMemGetAllocationGranularity", r);
    }
    mapped_ = (bytes_ + grain - 1) / grain * grain;
    if (CUresult r = create(&handle_, mapped_, &prop, 0); r != CUDA_SUCCESS) {
      return DriverError("cuMemCreate", r);
    }
    if (CUresult r = reserve(&base_, mapped_, grain, 0, 0); r != CUDA_SUCCESS) {
      return DriverError("cuMemAddressReserve", r);
    }
    if (CUresult r = map_(base_, mapped_, 0, handle_, 0); r != CUDA_SUCCESS) {
      free_(base_, mapped_);
      base_ = 0;
      return DriverError("cuMemMap", r);
    }
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (CUresult r = set_access(base_, mapped_, &access, 1); r != CUDA_SUCCESS) {
      return DriverError("cuMemSetAccess", r);
    }
    if (CUresult r = export_handle(&fd_, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        r != CUDA_SUCCESS) {
      return DriverError("cuMemExportToShareableHandle", r);
    }
    return grpc::Status::OK;
  }

  int device_ = 0;
  size_t bytes_ = 0;
  bool vmm_ = false;
  void* ptr_ = nullptr;  // legacy: the cudaMalloc block
  // VMM: the allocation, its mapping here and the exported descriptor.
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr base_ = 0;
  size_t mapped_ = 0;
  int fd_ = -1;
  decltype(&::cuMemMap) map_ = nullptr;
  decltype(&::cuMemUnmap) unmap_ = nullptr;
  decltype(&::cuMemAddressFree) free_ = nullptr;
  decltype(&::cuMemRelease) release_ = nullptr;
};

}  // namespace

grpc::Status CreateCudaOperands(const std::string& uuid, bool vmm, size_t bytes,
                                std::unique_ptr<DeviceOperands>* out) {
  return CudaOperands::Create(uuid, vmm, bytes, out);
}

}  // namespace arbiter::client
