// arbiterctl's zero-copy operands (matmul --operands device): one region of
// memory the daemon maps, holding A, B and C at offsets aligned for every
// candidate. Where the memory lives depends on the daemon's backend (its
// ServerInfo.region_kinds): host shared memory (a sealed memfd) for the CPU
// backend; GPU memory on the daemon's device for CUDA - a cudaMalloc block
// shared by legacy IPC handle, or a cuMemCreate allocation exported as a POSIX
// fd (CUDA builds of arbiterctl only) - or, asked for by "memfd" (or by "auto"
// in a build without CUDA), host shared memory that the daemon copies to its
// GPU and back.
//
// Ordering: Write completes (the copy is synchronized) before it returns, so
// a Matmul named after it reads the new bytes; the daemon synchronizes its
// stream before replying, so Read after the response sees C.
//
// Not thread-safe: one command's operands.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "client/arbiter_client.h"

namespace arbiter::client {

class DeviceOperands {
 public:
  virtual ~DeviceOperands() = default;

  // `bytes` of memory of `kind` ("auto": the first the daemon maps that this
  // build can allocate; "memfd", "ipc" or "vmm"), on the daemon's device
  // (`info.uuid` picks the GPU). FAILED_PRECONDITION saying why when none fits.
  static grpc::Status Create(const v1::ServerInfoResponse& info, const std::string& kind,
                             size_t bytes, std::unique_ptr<DeviceOperands>* out);

  virtual grpc::Status Write(size_t offset, const std::string& bytes) = 0;
  virtual grpc::Status Read(size_t offset, size_t bytes, std::string* out) = 0;
  // Registers the whole memory as one region of `client`'s session.
  virtual grpc::Status Register(ArbiterClient& client, const std::string& label,
                                v1::Region* region) = 0;
  virtual const char* kind_name() const = 0;  // "memfd", "ipc", "vmm"
};

#ifdef ARBITER_CTL_WITH_CUDA
// cuda_operands.cc: GPU memory on the device whose UUID is `uuid` ("" : device 0).
grpc::Status CreateCudaOperands(const std::string& uuid, bool vmm, size_t bytes,
                                std::unique_ptr<DeviceOperands>* out);
// The CUDA ordinal of the GPU whose UUID is `uuid` (device 0 when empty);
// FAILED_PRECONDITION when this process sees no such GPU.
grpc::Status FindCudaDevice(const std::string& uuid, int* device);
#endif

}  // namespace arbiter::client
