// What the CPU backend reads about the host it runs on: the model name and the
// last-level cache size. Pure functions over files, so tests can point them at
// fakes of /proc/cpuinfo and sysfs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace arbiter::cpu {

// The first "model name" in a /proc/cpuinfo-formatted file, or nullopt.
std::optional<std::string> ReadCpuModelName(const std::string& cpuinfo_path);

// Size in bytes of the highest-level cache listed under
// `cpu_dir`/cpu0/cache/index*/ (files `level` and `size`, e.g. "3" and "32768K");
// the largest one where a level lists several. nullopt where none can be read
// (containers and some VMs hide sysfs cache entries).
std::optional<int64_t> ReadLastLevelCacheBytes(const std::string& cpu_dir);

// Parses a sysfs cache size: "48K", "2048K", "32M", or a plain byte count.
std::optional<int64_t> ParseCacheSize(const std::string& text);

}  // namespace arbiter::cpu
