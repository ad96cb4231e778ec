// Reads a GPU's current SM clock through NVML, loaded at run time
// (dlopen of libnvidia-ml.so.1, which ships with the driver, not the toolkit):
// arbiterd links no NVML, and where the library or the device is not there the
// clock is simply unknown.
//
// Thread-safe: NVML calls are thread-safe; the object is immutable once opened.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace arbiter::cuda {

class NvmlClock {
 public:
  // The device with this UUID ("GPU-xxxxxxxx-..."); nullptr (with the reason in
  // `why`, if given) when NVML or the device cannot be opened.
  static std::unique_ptr<NvmlClock> Open(const std::string& uuid, std::string* why = nullptr);
  ~NvmlClock();
  NvmlClock(const NvmlClock&) = delete;
  NvmlClock& operator=(const NvmlClock&) = delete;

  // The SM clock now, in MHz; nullopt when NVML does not answer.
  std::optional<double> SmMhz() const;

 private:
  struct Api;  // the NVML entry points resolved from the library
  explicit NvmlClock(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace arbiter::cuda
