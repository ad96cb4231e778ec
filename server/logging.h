// How arbiterd logs: spdlog's default logger ("arbiterd", on stdout), one line
// per event, as text ("[time] [level] message") or as JSON - one object per
// line, {"time","level","logger","thread","msg"}, for log collectors
// (Kubernetes, journald exporters) that parse fields instead of patterns.
//
// The level comes from --log-level when given, else from the environment
// (ARBITER_LOG_LEVEL), else "info".
//
// Lines cannot be forged or broken by what a message carries (client-supplied
// reasons, candidate names, status messages): in text, control characters
// (newlines included) are written escaped (EscapeForTextLog); in JSON, strings
// are escaped per RFC 8259. libprotobuf's and gRPC's own log messages (invalid
// UTF-8 in a request, transport errors) go through the same logger instead of
// straight to stderr in their own formats.
//
// Thread-safety: ConfigureLogging replaces the process-wide default logger;
// call it once, before other threads log. JsonFormatter is used under the
// sink's mutex and keeps no state.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/formatter.h>

#include "absl/status/status.h"

namespace arbiter::server {

// The environment variable read when --log-level is not given.
inline constexpr const char kLogLevelEnv[] = "ARBITER_LOG_LEVEL";

// Makes the default logger write `format` ("text" or "json") at `level`
// (trace, debug, info, warn, error, critical, off). INVALID_ARGUMENT naming the
// bad value, with nothing changed, when either is not one of those.
absl::Status ConfigureLogging(std::string_view format, std::string_view level);

// The level to log at and where it came from ("--log-level", kLogLevelEnv or
// "default"): the flag when non-empty, else `env` when set and non-empty, else info.
struct LogLevelChoice {
  std::string level;
  std::string origin;
};
LogLevelChoice ChooseLogLevel(std::string_view flag, const char* env);

// `s` with every character that could end or rewrite a line of text escaped:
// \n and \r as those two-character escapes, other C0 controls, DEL and the C1
// controls as \xNN or \uNNNN, U+2028/U+2029 as \u2028/\u2029. Everything else,
// including bytes that are not UTF-8, is copied.
std::string EscapeForTextLog(std::string_view s);

// One JSON object per message: time (UTC, RFC 3339 with microseconds), level
// (spdlog's names: trace, debug, info, warning, error, critical), logger,
// thread and msg. Strings are escaped per RFC 8259; bytes that are not valid
// UTF-8 become U+FFFD, so every line parses whatever a message carries
// (client-supplied reasons, file paths).
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

}  // namespace arbiter::server
