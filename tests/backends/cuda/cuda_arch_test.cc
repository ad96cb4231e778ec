// The CUDA backend's rules that need no GPU: architecture claims, and that a
// machine without a GPU reports none instead of crashing.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "backends/cuda/cuda_backend.h"

namespace arbiter::cuda {
namespace {

TEST(CudaArchitectureTest, PlusClaimAdmitsThatCapabilityAndNewer) {
  EXPECT_EQ(CudaBackend::ArchitectureGapFor("sm_80+", 80), "");
  EXPECT_EQ(CudaBackend::ArchitectureGapFor("sm_80+", 90), "");
  EXPECT_EQ(CudaBackend::ArchitectureGapFor("sm_80+", 120), "");
  EXPECT_NE(CudaBackend::ArchitectureGapFor("sm_80+", 75), "");
}

TEST(CudaArchitectureTest, ArchSpecificClaimAdmitsExactlyThatChip) {
  EXPECT_EQ(CudaBackend::ArchitectureGapFor("sm_90a", 90), "");
  EXPECT_NE(CudaBackend::ArchitectureGapFor("sm_90a", 100), "");
  EXPECT_NE(CudaBackend::ArchitectureGapFor("sm_90a", 89), "");
  EXPECT_NE(CudaBackend::ArchitectureGapFor("sm_90a", 80), "");
}

TEST(CudaArchitectureTest, PlainClaimAdmitsExactlyThatCapability) {
  EXPECT_EQ(CudaBackend::ArchitectureGapFor("sm_86", 86), "");
  EXPECT_NE(CudaBackend::ArchitectureGapFor("sm_86", 90), "");
}

TEST(CudaArchitectureTest, CpuAndMalformedClaimsAreRefusedWithReason) {
  const std::string cpu = CudaBackend::ArchitectureGapFor("cpu", 90);
  EXPECT_NE(cpu.find("CUDA device"), std::string::npos) << cpu;
  for (const char* bad : {"", "sm_", "sm_x0", "sm_90b", "gfx90a", "sm_80++", "90"}) {
    const std::string gap = CudaBackend::ArchitectureGapFor(bad, 90);
    EXPECT_NE(gap.find("unrecognized"), std::string::npos) << "claim \"" << bad << "\": " << gap;
  }
}

// Without a driver or GPU the runtime answers an error, never a count: that
// must read as no devices (so `--backend auto` serves on the CPU), not as an
// abort or whatever the count variable held.
TEST(CudaBackendNoGpuTest, VisibleDevicesIsTheRuntimeCountOrZero) {
  int count = -1;
  const cudaError_t err = cudaGetDeviceCount(&count);
  EXPECT_EQ(CudaBackend::VisibleDevices(), err == cudaSuccess ? count : 0)
      << "cudaGetDeviceCount: " << cudaGetErrorName(err);
}

TEST(CudaBackendNoGpuTest, CreateOnAMissingDeviceIsUnavailable) {
  CudaBackendOptions options;
  options.device = CudaBackend::VisibleDevices();  // one past the last
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable) << backend.status();
}

TEST(CudaDriverVersionTest, KernelModuleVersionIsReadFromProcText) {
  EXPECT_EQ(CudaBackend::KernelDriverVersion(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  9 2025\n"
                "GCC version:  gcc version 12.2.0\n"),
            "580.159.04");
  EXPECT_EQ(CudaBackend::KernelDriverVersion(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build"),
            "570.86.15");
  EXPECT_EQ(CudaBackend::KernelDriverVersion(""), "");
}

}  // namespace
}  // namespace arbiter::cuda
