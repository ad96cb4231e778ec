// Test support for the CUDA kernel families: random operands of one problem on
// the device, C poisoned with NaN and followed by a poisoned guard region, an
// f64 CPU reference over the operands as stored, and the engine's own oracle.
// Test-only: CUDA failures abort with the call and error (test tools may exit).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "engine/contract.h"
#include "engine/problem.h"
#include "kernels/common/launch_args.h"

namespace arbiter::kernels::testing {

// Empty when a CUDA device of compute capability >= min_cc (e.g. 80) is
// visible; otherwise why not, for GTEST_SKIP.
std::string MissingGpu(int min_cc);
int DeviceSmCount();

#define ARBITER_SKIP_WITHOUT_GPU(min_cc)                                          \
  do {                                                                            \
    const std::string arbiter_missing_ = ::arbiter::kernels::testing::MissingGpu(min_cc); \
    if (!arbiter_missing_.empty()) GTEST_SKIP() << arbiter_missing_;              \
  } while (0)

// Aborts with the call, error name and location unless `err` is cudaSuccess.
void CheckCuda(cudaError_t err, const char* call, const char* file, int line);
#define CUDA_OK(call) ::arbiter::kernels::testing::CheckCuda((call), #call, __FILE__, __LINE__)

// A launcher's arguments for problem `p` on device operands a, b and c,
// planned for `sm_count` SMs; no workspace.
LaunchArgs ArgsFor(const Problem& p, const void* a, const void* b, void* c, int sm_count);

// One problem's operands on the device. A and B are uniform in [-1, 1) rounded
// to the dtype (never zeros); C and a guard region after it are poisoned with
// all-one bytes, which is NaN in every dtype. Not copyable.
class DeviceGemm {
 public:
  DeviceGemm(const Problem& p, uint64_t seed);
  // The first `m` rows of `base`'s A and all of its B: the same rows of C must
  // come out of a batch-invariant kernel bit for bit.
  DeviceGemm(const DeviceGemm& base, int64_t m);
  ~DeviceGemm();
  DeviceGemm(const DeviceGemm&) = delete;
  DeviceGemm& operator=(const DeviceGemm&) = delete;

  const Problem& problem() const { return p_; }
  const void* a() const { return a_; }
  const void* b() const { return b_; }
  void* c() const { return c_; }
  // A copy of A at an address 2 bytes past a 16-byte boundary: forces the
  // padded-copy or element-load paths of kernels that check alignment.
  const void* misaligned_a();
  // A launcher's arguments for this problem on A, B and C as uploaded, planned
  // for `sm_count` SMs; no workspace.
  LaunchArgs Args(int sm_count) const;

  void PoisonC();                          // C and its guard
  std::vector<uint8_t> DownloadC() const;  // C's raw bytes (waits for the device)
  std::vector<double> Reference() const;   // f64 over the stored operands

  // Guard untouched, every element of C written, finite and within `budget`
  // (engine/oracle.h's CheckOutput). Waits for the device.
  ::testing::AssertionResult Matches(const AccuracyBudget& budget) const;

 private:
  void Upload();

  Problem p_;
  std::vector<uint8_t> host_a_, host_b_;
  void* a_ = nullptr;
  void* b_ = nullptr;
  void* c_ = nullptr;           // c_bytes() + kGuardBytes
  void* a_shifted_ = nullptr;   // for misaligned_a()
};

// A device test on a stream of its own, skipped (saying why) without an sm_90
// GPU; sm_count_ is the device's. Owns the stream.
class Sm90StreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ARBITER_SKIP_WITHOUT_GPU(90);
    CUDA_OK(cudaStreamCreate(&stream_));
    sm_count_ = DeviceSmCount();
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  cudaStream_t stream_ = nullptr;
  int sm_count_ = 0;
};

}  // namespace arbiter::kernels::testing
