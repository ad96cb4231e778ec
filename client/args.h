// Command-line arguments of arbiterctl: a subcommand and its options, given as
// "--name value" or "--name=value" (repeatable: every value is kept in order)
// and boolean switches ("--json"). Unknown names are errors, so a typo never
// silently runs a different command.
//
// Not thread-safe; used by one thread at startup.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace arbiter::client {

class Args {
 public:
  // `switches` take no value; `options` take one. Returns false with `error` set
  // on an unknown name or a missing value.
  bool Parse(const std::vector<std::string>& argv, const std::set<std::string>& switches,
             const std::set<std::string>& options, std::string* error);

  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  // The last value given for `name`, or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> GetAll(const std::string& name) const;
  // The last value as an integer; nullopt (with `error` set) when absent or not a number.
  std::optional<int64_t> GetInt(const std::string& name, std::string* error) const;

 private:
  std::vector<std::string> positional_;
  std::multimap<std::string, std::string> values_;
};

}  // namespace arbiter::client
