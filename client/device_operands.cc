#include "client/device_operands.h"

#include <algorithm>
#include <cstring>

#include "client/shared_memory.h"

namespace arbiter::client {
namespace {

class HostOperands final : public DeviceOperands {
 public:
  explicit HostOperands(std::unique_ptr<SharedMemory> memory) : memory_(std::move(memory)) {}

  grpc::Status Write(size_t offset, const std::string& bytes) override {
    std::memcpy(static_cast<char*>(memory_->data()) + offset, bytes.data(), bytes.size());
    return grpc::Status::OK;
  }
  grpc::Status Read(size_t offset, size_t bytes, std::string* out) override {
    out->assign(static_cast<const char*>(memory_->data()) + offset, bytes);
    return grpc::Status::OK;
  }
  grpc::Status Register(ArbiterClient& client, const std::string& label,
                        v1::Region* region) override {
    return client.RegisterFd(memory_->fd(), v1::REGION_KIND_HOST_MEMFD,
                             static_cast<int64_t>(memory_->bytes()), label, region);
  }
  const char* kind_name() const override { return "memfd"; }

 private:
  std::unique_ptr<SharedMemory> memory_;
};

bool Offers(const v1::ServerInfoResponse& info, v1::RegionKind kind) {
  return std::find(info.region_kinds().begin(), info.region_kinds().end(), kind) !=
         info.region_kinds().end();
}

}  // namespace

grpc::Status DeviceOperands::Create(const v1::ServerInfoResponse& info, const std::string& kind,
                                    size_t bytes, std::unique_ptr<DeviceOperands>* out) {
  // "auto" takes device memory where the daemon maps it and this build can
  // make it (no copies at all), else host shared memory (a GPU daemon copies
  // it over the bus; a CPU daemon's kernels read it in place).
#ifdef ARBITER_CTL_WITH_CUDA
  if ((kind == "auto" || kind == "ipc") && Offers(info, v1::REGION_KIND_CUDA_IPC)) {
    return CreateCudaOperands(info.uuid(), /*vmm=*/false, bytes, out);
  }
  if ((kind == "auto" || kind == "vmm") && Offers(info, v1::REGION_KIND_CUDA_VMM_FD)) {
    return CreateCudaOperands(info.uuid(), /*vmm=*/true, bytes, out);
  }
  const char* built = "memfd, ipc, vmm";
#else
  const char* built = "memfd (this arbiterctl is built without CUDA)";
#endif
  if ((kind == "auto" || kind == "memfd") && Offers(info, v1::REGION_KIND_HOST_MEMFD)) {
    std::unique_ptr<SharedMemory> memory;
    if (grpc::Status s = SharedMemory::Create(bytes, "arbiterctl-operands", &memory); !s.ok()) {
      return s;
    }
    *out = std::make_unique<HostOperands>(std::move(memory));
    return grpc::Status::OK;
  }
  std::string offered;
  for (int k : info.region_kinds()) {
    offered += (offered.empty() ? "" : ", ") + v1::RegionKind_Name(static_cast<v1::RegionKind>(k));
  }
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "--region-kind " + kind + ": the daemon (" + info.backend() + ") maps " +
                          (offered.empty() ? "no regions" : offered) + "; this arbiterctl allocates " +
                          built);
}

}  // namespace arbiter::client
