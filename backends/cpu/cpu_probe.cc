#include "backends/cpu/cpu_probe.h"

#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace arbiter::cpu {
namespace {

std::string Trim(const std::string& s) {
  size_t begin = 0;
  size_t end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

std::optional<std::string> ReadFirstLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return Trim(line);
}

}  // namespace

std::optional<std::string> ReadCpuModelName(const std::string& cpuinfo_path) {
  std::ifstream in(cpuinfo_path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (Trim(line.substr(0, colon)) != "model name") continue;
    std::string name = Trim(line.substr(colon + 1));
    if (!name.empty()) return name;
  }
  return std::nullopt;
}

std::optional<int64_t> ParseCacheSize(const std::string& text) {
  const std::string s = Trim(text);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end == s.data() || value <= 0) return std::nullopt;
  const std::string suffix(end, s.data() + s.size());
  if (suffix.empty()) return value;
  if (suffix == "K") return value << 10;
  if (suffix == "M") return value << 20;
  if (suffix == "G") return value << 30;
  return std::nullopt;
}

std::optional<int64_t> ReadLastLevelCacheBytes(const std::string& cpu_dir) {
  const std::filesystem::path cache_dir = std::filesystem::path(cpu_dir) / "cpu0" / "cache";
  std::error_code ec;
  std::filesystem::directory_iterator it(cache_dir, ec);
  if (ec) return std::nullopt;
  int best_level = -1;
  int64_t best_bytes = 0;
  for (const auto& entry : it) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    const auto level_text = ReadFirstLine(entry.path() / "level");
    const auto size_text = ReadFirstLine(entry.path() / "size");
    if (!level_text || !size_text) continue;
    int level = 0;
    const auto [p, lec] =
        std::from_chars(level_text->data(), level_text->data() + level_text->size(), level);
    const auto bytes = ParseCacheSize(*size_text);
    if (lec != std::errc() || !bytes) continue;
    if (level > best_level || (level == best_level && *bytes > best_bytes)) {
      best_level = level;
      best_bytes = *bytes;
    }
  }
  if (best_level < 0) return std::nullopt;
  return best_bytes;
}

}  // namespace arbiter::cpu
