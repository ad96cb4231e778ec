#include "server/logging.h"

#include <chrono>
#include <ctime>
#include <iterator>

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "engine/status.h"

namespace arbiter::server {
namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// spdlog::level::from_str answers `off` for any name it does not know, which
// would silence a daemon whose operator mistyped "verbose"; unknown is an error.
absl::StatusOr<spdlog::level::level_enum> ParseLevel(std::string_view name) {
  const spdlog::level::level_enum level = spdlog::level::from_str(std::string(name));
  if (level == spdlog::level::off && name != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("log level: expected trace, debug, info, warn, error, critical or off, got \"",
                     std::string(name), "\""));
  }
  return level;
}

void Append(spdlog::memory_buf_t& out, std::string_view s) { out.append(s.data(), s.data() + s.size()); }

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629: no
// overlongs, no surrogates, nothing past U+10FFFF), or 0 when it is not one.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) -> int {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : -1;
  };
  const int lead = byte(0);
  size_t length = 0;
  int second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong below U+0800
    if (lead == 0xED) second_max = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong below U+10000
    if (lead == 0xF4) second_max = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  const int second = byte(1);
  if (second < second_min || second > second_max) return 0;
  for (size_t k = 2; k < length; ++k) {
    const int next = byte(k);
    if (next < 0x80 || next > 0xBF) return 0;
  }
  return length;
}

// `s` as the inside of a JSON string (RFC 8259): quote, backslash and control
// characters escaped, well-formed UTF-8 copied, each other byte U+FFFD.
void AppendJsonString(spdlog::memory_buf_t& out, std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(s, i);
      Append(out, length > 0 ? s.substr(i, length) : kReplacementCharacter);
      i += length > 0 ? length : 1;
      continue;
    }
    switch (c) {
      case '"': Append(out, "\\\""); break;
      case '\\': Append(out, "\\\\"); break;
      case '\n': Append(out, "\\n"); break;
      case '\r': Append(out, "\\r"); break;
      case '\t': Append(out, "\\t"); break;
      case '\b': Append(out, "\\b"); break;
      case '\f': Append(out, "\\f"); break;
      default:
        if (c < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
}

// The %* flag of the text pattern: the message with EscapeForTextLog applied.
class EscapedPayload final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    Append(dest, EscapeForTextLog(std::string_view(msg.payload.data(), msg.payload.size())));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedPayload>();
  }
};

// libprotobuf writes its own lines to stderr (for instance, when a request's
// string field is not UTF-8); through the daemon's logger they are escaped and
// formatted like every other line.
void ProtobufLogHandler(google::protobuf::LogLevel level, const char* file, int line,
                        const std::string& message) {
  spdlog::level::level_enum to = spdlog::level::info;
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO: to = spdlog::level::info; break;
    case google::protobuf::LOGLEVEL_WARNING: to = spdlog::level::warn; break;
    case google::protobuf::LOGLEVEL_ERROR: to = spdlog::level::err; break;
    case google::protobuf::LOGLEVEL_FATAL: to = spdlog::level::critical; break;
  }
  spdlog::log(to, "libprotobuf {}:{}: {}", file, line, message);
}

// The same for gRPC core's gpr_log (transport and parsing errors).
void GrpcLogHandler(gpr_log_func_args* args) {
  spdlog::level::level_enum to = spdlog::level::info;
  switch (args->severity) {
    case GPR_LOG_SEVERITY_DEBUG: to = spdlog::level::debug; break;
    case GPR_LOG_SEVERITY_INFO: to = spdlog::level::info; break;
    case GPR_LOG_SEVERITY_ERROR: to = spdlog::level::err; break;
  }
  spdlog::log(to, "grpc {}:{}: {}", args->file, args->line, args->message);
}

}  // namespace

std::string EscapeForTextLog(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const unsigned char next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
    const unsigned char third = i + 2 < s.size() ? static_cast<unsigned char>(s[i + 2]) : 0;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // C1 controls (NEL among them)
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else if (c == 0xE2 && next == 0x80 && (third == 0xA8 || third == 0xA9)) {
      out += third == 0xA8 ? "\\u2028" : "\\u2029";  // line and paragraph separators
      i += 2;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

void JsonFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  using std::chrono::system_clock;
  const auto seconds = std::chrono::floor<std::chrono::seconds>(msg.time);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(msg.time - seconds);
  const std::time_t t = system_clock::to_time_t(system_clock::time_point(seconds));
  std::tm utc{};
  gmtime_r(&t, &utc);
  fmt::format_to(std::back_inserter(dest),
                 "{{\"time\":\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z\",\"level\":\"",
                 utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
                 utc.tm_sec, micros.count());
  const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
  AppendJsonString(dest, std::string_view(level.data(), level.size()));
  Append(dest, "\",\"logger\":\"");
  AppendJsonString(dest, std::string_view(msg.logger_name.data(), msg.logger_name.size()));
  fmt::format_to(std::back_inserter(dest), "\",\"thread\":{},\"msg\":\"", msg.thread_id);
  AppendJsonString(dest, std::string_view(msg.payload.data(), msg.payload.size()));
  Append(dest, "\"}\n");
}

std::unique_ptr<spdlog::formatter> JsonFormatter::clone() const {
  return std::make_unique<JsonFormatter>();
}

absl::Status ConfigureLogging(std::string_view format, std::string_view level) {
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("log format: expected text or json, got \"", std::string(format), "\""));
  }
  ASSIGN_OR_RETURN(const spdlog::level::level_enum parsed, ParseLevel(level));
  std::shared_ptr<spdlog::logger> logger;
  if (format == "json") {
    // A plain sink: colour codes would be bytes inside the JSON line.
    logger = std::make_shared<spdlog::logger>("arbiterd",
                                              std::make_shared<spdlog::sinks::stdout_sink_mt>());
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger = std::make_shared<spdlog::logger>(
        "arbiterd", std::make_shared<spdlog::sinks::stdout_color_sink_mt>());
    // spdlog's default pattern without the logger name (there is only one), the
    // message escaped so that it stays on its line.
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<EscapedPayload>('*').set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %*");
    logger->set_formatter(std::move(formatter));
  }
  spdlog::set_default_logger(std::move(logger));
  spdlog::set_level(parsed);
  google::protobuf::SetLogHandler(&ProtobufLogHandler);
  gpr_set_log_function(&GrpcLogHandler);
  return absl::OkStatus();
}

LogLevelChoice ChooseLogLevel(std::string_view flag, const char* env) {
  if (!flag.empty()) return {std::string(flag), "--log-level"};
  if (env != nullptr && *env != '\0') return {env, kLogLevelEnv};
  return {"info", "default"};
}

}  // namespace arbiter::server
