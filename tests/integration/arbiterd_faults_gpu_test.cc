// A candidate that faults the GPU, on the real daemon (ctest label gpu): the
// planted planted_oob writes far past C at M = kOutOfBoundsM, a sticky CUDA
// error that ends the process's context. arbiterd_faults must see the fault at
// its next step, name the candidate in the intent file and exit with status 3;
// restarted on the same store (the test plays the supervisor), it quarantines
// planted_oob for that bucket alone, measures the bucket again without it, and
// still races it in every other bucket.
#include <cuda_runtime_api.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "tests/integration/faults/faults_fixture.h"
#include "tests/integration/faults/planted.h"

namespace arbiter::testing {
namespace {

class GpuFaultsTest : public FaultsTest {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no CUDA device is visible";
    }
    FaultsTest::SetUp();
    backend_ = "cuda";
    // Bundled for the GPU machine (scripts/gpu-suite.sh), arbiterd_faults lies beside
    // this binary; in the build tree, where CMake put it.
    const std::filesystem::path beside =
        std::filesystem::read_symlink("/proc/self/exe").parent_path() / "arbiterd_faults";
    if (std::filesystem::exists(beside)) binary_ = beside.string();
    if (!std::filesystem::exists(binary_)) GTEST_SKIP() << "arbiterd_faults not found at " << binary_;
  }
};

TEST_F(GpuFaultsTest, AnOutOfBoundsWriteOnTheGpuIsQuarantinedForItsBucketAfterARestart) {
  DiesThenQuarantines(kOutOfBoundsM, "planted_oob", /*kExitCandidateFault=*/3, "device fault");
}

}  // namespace
}  // namespace arbiter::testing
