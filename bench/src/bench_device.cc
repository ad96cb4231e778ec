#include "bench/src/bench_device.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_backend.h"
#include "kernels/registry/cpu_candidates.h"
#ifdef ARBITER_WITH_CUDA
#include "bench/src/cuda_copy_probe.h"
#include "kernels/registry/cuda_candidates.h"
#endif

namespace arbiter::bench {

absl::StatusOr<BenchDevice> OpenDevice(const std::string& kind, int cpu_threads) {
  BenchDevice dev;
  dev.kind = kind;
  if (kind == "cpu") {
    CpuBackendOptions options;
    options.threads = cpu_threads;
    ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> cpu, CpuBackend::Create(options));
    ASSIGN_OR_RETURN(dev.registry, Registry::Create(CpuCandidates(cpu->threads()), *cpu));
    dev.backend = std::move(cpu);
    dev.vendor = "openblas";
  } else if (kind == "cuda") {
#ifdef ARBITER_WITH_CUDA
    if (cuda::CudaBackend::VisibleDevices() <= 0) {
      return absl::FailedPreconditionError("backend cuda: no CUDA device is visible");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> gpu,
                     cuda::CudaBackend::Create(cuda::CudaBackendOptions{}));
    ASSIGN_OR_RETURN(dev.registry, Registry::Create(cuda::CudaCandidates(*gpu), *gpu));
    dev.backend = std::move(gpu);
    dev.vendor = "cublas";
#else
    return absl::FailedPreconditionError("backend cuda: this arbiter-bench was built without CUDA");
#endif
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("backend: expected cpu or cuda, got \"", kind, "\""));
  }
  ASSIGN_OR_RETURN(dev.stream, dev.backend->CreateStream());
  return dev;
}

absl::StatusOr<double> CopyBandwidth(BenchDevice& dev, size_t bytes, int repeats) {
  std::vector<double> seconds;
#ifdef ARBITER_WITH_CUDA
  if (dev.kind == "cuda") {
    ASSIGN_OR_RETURN(seconds, CudaCopySeconds(bytes, repeats));
  }
#endif
  if (dev.kind == "cpu") {
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    std::memcpy(dst.data(), src.data(), bytes);  // touch every page first
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(dst.data(), src.data(), bytes);
      const auto t1 = std::chrono::steady_clock::now();
      seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
  }
  if (seconds.empty()) return absl::InternalError("copy bandwidth: nothing measured");
  const SampleStats stats = Summarize(seconds);
  return 2.0 * static_cast<double>(bytes) / stats.median;
}

std::vector<const RegisteredCandidate*> Covering(const BenchDevice& dev, const Problem& p) {
  std::vector<const RegisteredCandidate*> out;
  for (const RegisteredCandidate& c : dev.registry->candidates()) {
    if (dev.registry->CoverageGap(c, p).empty()) out.push_back(&c);
  }
  return out;
}

std::string TimerMethod(const BenchDevice& dev) {
  if (dev.kind == "cuda") {
    return "CUDA events around the kernel alone on the measuring stream (device time)";
  }
  return "steady clock around the kernel call on the calling thread (the CPU backend's device "
         "timer)";
}

}  // namespace arbiter::bench
