#include "client/args.h"

#include <charconv>

namespace arbiter::client {

bool Args::Parse(const std::vector<std::string>& argv, const std::set<std::string>& switches,
                 const std::set<std::string>& options, std::string* error) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (switches.count(name)) {
      if (value && *value != "true" && *value != "false") {
        *error = "--" + name + " takes no value (or =true/=false), got \"" + *value + "\"";
        return false;
      }
      if (!value || *value == "true") values_.emplace(name, "true");
      continue;
    }
    if (!options.count(name)) {
      *error = "unknown option --" + name;
      return false;
    }
    if (!value) {
      if (i + 1 >= argv.size()) {
        *error = "--" + name + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    values_.emplace(name, *value);
  }
  return true;
}

std::string Args::Get(const std::string& name, const std::string& fallback) const {
  auto [begin, end] = values_.equal_range(name);
  if (begin == end) return fallback;
  return std::prev(end)->second;
}

std::vector<std::string> Args::GetAll(const std::string& name) const {
  std::vector<std::string> out;
  auto [begin, end] = values_.equal_range(name);
  for (auto it = begin; it != end; ++it) out.push_back(it->second);
  return out;
}

std::optional<int64_t> Args::GetInt(const std::string& name, std::string* error) const {
  if (!Has(name)) {
    *error = "--" + name + " is required";
    return std::nullopt;
  }
  const std::string text = Get(name);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    *error = "--" + name + ": expected an integer, got \"" + text + "\"";
    return std::nullopt;
  }
  return value;
}

}  // namespace arbiter::client
