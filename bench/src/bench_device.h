// The device a bench run measures, opened the way arbiterd opens it: the
// backend (cpu or cuda) and the registry of every candidate built into this
// binary. Also the two rates a shape's floor is computed from, measured in the
// same run: the vendor delegate's best large-square rate and the device's copy
// bandwidth.
//
// Not thread-safe.
#pragma once

#include <memory>
#include <string>

#include "engine/backend.h"
#include "engine/measurer.h"
#include "engine/registry.h"

namespace arbiter::bench {

struct BenchDevice {
  std::string kind;    // "cpu" or "cuda"
  std::string vendor;  // the vendor delegate candidate: "cublas" or "openblas"
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Registry> registry;
  std::unique_ptr<Stream> stream;
};

// Opens `kind` ("cpu" or "cuda"); cpu_threads applies to the CPU backend (0: all).
absl::StatusOr<BenchDevice> OpenDevice(const std::string& kind, int cpu_threads);

// Device-to-device copy bandwidth in bytes/s (read + write counted), the median
// of `repeats` copies of `bytes`: CUDA events around cudaMemcpyAsync on the GPU,
// the steady clock around memcpy on the CPU.
absl::StatusOr<double> CopyBandwidth(BenchDevice& dev, size_t bytes, int repeats);

// The candidates of the registry that cover `p` on this device.
std::vector<const RegisteredCandidate*> Covering(const BenchDevice& dev, const Problem& p);

// The timing method in words, for the results' method header.
std::string TimerMethod(const BenchDevice& dev);

}  // namespace arbiter::bench
