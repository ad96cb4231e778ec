#include "backends/cuda/nvml_clock.h"

#include <dlfcn.h>

#include <utility>

namespace arbiter::cuda {
namespace {

// The few NVML declarations used, as the NVML API documents them: functions
// return 0 (NVML_SUCCESS) on success; a device is an opaque handle; the SM
// clock is clock type 1 (NVML_CLOCK_SM).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;

}  // namespace

struct NvmlClock::Api {
  void* library = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlDevice device = nullptr;

  ~Api() {
    if (shutdown != nullptr) shutdown();
    if (library != nullptr) dlclose(library);
  }
};

std::unique_ptr<NvmlClock> NvmlClock::Open(const std::string& uuid, std::string* why) {
  auto fail = [&](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return nullptr;
  };
  auto api = std::make_unique<Api>();
  api->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->library == nullptr) return fail("libnvidia-ml.so.1 not loadable");
  auto init = reinterpret_cast<NvmlReturn (*)()>(dlsym(api->library, "nvmlInit_v2"));
  auto by_uuid = reinterpret_cast<NvmlReturn (*)(const char*, NvmlDevice*)>(
      dlsym(api->library, "nvmlDeviceGetHandleByUUID"));
  auto shutdown = reinterpret_cast<NvmlReturn (*)()>(dlsym(api->library, "nvmlShutdown"));
  api->clock_info = reinterpret_cast<NvmlReturn (*)(NvmlDevice, int, unsigned*)>(
      dlsym(api->library, "nvmlDeviceGetClockInfo"));
  if (init == nullptr || by_uuid == nullptr || shutdown == nullptr || api->clock_info == nullptr) {
    return fail("libnvidia-ml.so.1 lacks an entry point");
  }
  if (init() != kNvmlSuccess) return fail("nvmlInit_v2 failed");
  api->shutdown = shutdown;  // from here on, the destructor shuts NVML down
  if (by_uuid(uuid.c_str(), &api->device) != kNvmlSuccess) {
    return fail("NVML does not know device " + uuid);
  }
  unsigned mhz = 0;
  if (api->clock_info(api->device, kNvmlClockSm, &mhz) != kNvmlSuccess) {
    return fail("NVML reports no SM clock for " + uuid);
  }
  return std::unique_ptr<NvmlClock>(new NvmlClock(std::move(api)));
}

NvmlClock::NvmlClock(std::unique_ptr<Api> api) : api_(std::move(api)) {}
NvmlClock::~NvmlClock() = default;

std::optional<double> NvmlClock::SmMhz() const {
  unsigned mhz = 0;
  if (api_->clock_info(api_->device, kNvmlClockSm, &mhz) != kNvmlSuccess) return std::nullopt;
  return static_cast<double>(mhz);
}

}  // namespace arbiter::cuda
