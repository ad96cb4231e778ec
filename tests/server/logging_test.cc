#include "server/logging.h"

#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "arbiter/v1/arbiter.pb.h"

namespace arbiter::server {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Parses one line as a JSON object with a real parser (protobuf's, into a
// Struct); fails the test when it is not one.
google::protobuf::Struct ParseJson(const std::string& line) {
  google::protobuf::Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(line, &object);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n  line: " << line;
  // JSON strings may not hold raw control characters; a parser may be lenient.
  for (const char c : line) {
    EXPECT_GE(static_cast<unsigned char>(c), 0x20) << "raw control byte in: " << line;
  }
  return object;
}

std::string Field(const google::protobuf::Struct& object, const std::string& name) {
  const auto it = object.fields().find(name);
  if (it == object.fields().end()) return "<missing>";
  return it->second.string_value();
}

// Formats `messages` with JsonFormatter through a logger of its own.
std::string FormatJson(const std::vector<std::string>& messages,
                       spdlog::level::level_enum level = spdlog::level::info) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "unit", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_formatter(std::make_unique<JsonFormatter>());
  logger->set_level(spdlog::level::trace);
  for (const std::string& m : messages) logger->log(level, m);
  logger->flush();
  return out.str();
}

class LoggingTest : public ::testing::Test {
 protected:
  // ConfigureLogging replaces the process-wide logger: put the plain one back.
  void TearDown() override { ASSERT_TRUE(ConfigureLogging("text", "info").ok()); }
};

TEST_F(LoggingTest, JsonLineCarriesTimeLevelLoggerThreadAndMessage) {
  const std::vector<std::string> lines = Lines(FormatJson({"verdict stored"}, spdlog::level::warn));
  ASSERT_EQ(lines.size(), 1u);
  const google::protobuf::Struct object = ParseJson(lines[0]);
  EXPECT_EQ(Field(object, "msg"), "verdict stored");
  EXPECT_EQ(Field(object, "level"), "warning");
  EXPECT_EQ(Field(object, "logger"), "unit");
  EXPECT_TRUE(std::regex_match(Field(object, "time"),
                               std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)")))
      << Field(object, "time");
  ASSERT_EQ(object.fields().count("thread"), 1u);
  EXPECT_GT(object.fields().at("thread").number_value(), 0);
}

TEST_F(LoggingTest, JsonEscapesQuotesBackslashesNewlinesAndControlCharacters) {
  const std::string message =
      "force reason \"use \\\"cublas\\\" here\"\nsecond line\tand a tab\r\x01\x1f end";
  const std::string text = FormatJson({message});
  const std::vector<std::string> lines = Lines(text);
  ASSERT_EQ(lines.size(), 1u) << "a newline in a message must not split its line:\n" << text;
  EXPECT_EQ(Field(ParseJson(lines[0]), "msg"), message);
  EXPECT_NE(lines[0].find(R"(\"use \\\"cublas\\\" here\"\nsecond line\tand a tab\r\u0001\u001f)"),
            std::string::npos)
      << lines[0];
}

TEST_F(LoggingTest, JsonKeepsUtf8AndReplacesBytesThatAreNotUtf8) {
  const std::vector<std::string> lines = Lines(FormatJson({
      "0.5 \xC2\xB5s \xE2\x9C\x93 \xF0\x9D\x84\x9E",  // µs ✓ U+1D11E: kept as they are
      "bad \xFF byte, cut \xE2\x9C",                  // a stray byte; a truncated sequence
      "overlong \xC0\xAF, surrogate \xED\xA0\x80",     // forms RFC 3629 forbids
  }));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(Field(ParseJson(lines[0]), "msg"), "0.5 \xC2\xB5s \xE2\x9C\x93 \xF0\x9D\x84\x9E");
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(Field(ParseJson(lines[1]), "msg"), "bad " + r + " byte, cut " + r + r);
  EXPECT_EQ(Field(ParseJson(lines[2]), "msg"), "overlong " + r + r + ", surrogate " + r + r + r);
}

TEST_F(LoggingTest, ConfigureJsonMakesTheDefaultLoggerWriteJsonAtTheLevelGiven) {
  ::testing::internal::CaptureStdout();
  const absl::Status configured = ConfigureLogging("json", "info");
  spdlog::info("listening on {} (\"{}\")", "127.0.0.1:0", "quoted");
  spdlog::debug("below the level");
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(configured.ok()) << configured;
  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  const google::protobuf::Struct object = ParseJson(lines[0]);
  EXPECT_EQ(Field(object, "msg"), "listening on 127.0.0.1:0 (\"quoted\")");
  EXPECT_EQ(Field(object, "logger"), "arbiterd");
  EXPECT_EQ(Field(object, "level"), "info");
}

TEST_F(LoggingTest, ConfigureTextWritesPlainLines) {
  ::testing::internal::CaptureStdout();
  const absl::Status configured = ConfigureLogging("text", "warn");
  spdlog::info("below the level");
  spdlog::warn("store slow");
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(configured.ok()) << configured;
  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  EXPECT_NE(lines[0].front(), '{');
  EXPECT_NE(lines[0].find("store slow"), std::string::npos) << lines[0];
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
}

TEST_F(LoggingTest, TextKeepsAMessageOnItsLineWhateverItCarries) {
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(ConfigureLogging("text", "info").ok());
  // A client's reason that tries to forge a line of its own, and to move the cursor.
  spdlog::info("admin force reason \"{}\"",
               "pin\n[2099-01-01 00:00:00.000] [critical] forged\r\x1b[2J\xC2\x85\xE2\x80\xA8 end");
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  EXPECT_NE(lines[0].find(R"(pin\n[2099-01-01 00:00:00.000] [critical] forged\r\x1b[2J\u0085\u2028 end)"),
            std::string::npos)
      << lines[0];
}

TEST(EscapeForTextLogTest, EscapesWhatCouldEndOrRewriteALineAndCopiesTheRest) {
  EXPECT_EQ(EscapeForTextLog("plain \"quoted\" 0.5 \xC2\xB5s \xE2\x9C\x93"),
            "plain \"quoted\" 0.5 \xC2\xB5s \xE2\x9C\x93");
  EXPECT_EQ(EscapeForTextLog("a\nb\rc\td\x7f\x01"), R"(a\nb\rc\x09d\x7f\x01)");
  EXPECT_EQ(EscapeForTextLog("nel\xC2\x85 ls\xE2\x80\xA8 ps\xE2\x80\xA9"), R"(nel\u0085 ls\u2028 ps\u2029)");
  EXPECT_EQ(EscapeForTextLog("not utf-8 \xFF\xC2"), "not utf-8 \xFF\xC2");
}

// libprotobuf reports a request's string field that is not UTF-8 on its own;
// it must reach the log as one of the daemon's lines, not as raw stderr text.
TEST_F(LoggingTest, ProtobufsOwnMessagesGoThroughTheDaemonLogger) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(ConfigureLogging("json", "info").ok());
  v1::QuarantineRequest request;
  // Field 3 (reason), length 3: bytes that are not UTF-8.
  EXPECT_FALSE(request.ParseFromString(std::string("\x1a\x03\xff\xfe\xfd", 5)));
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");
  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  const google::protobuf::Struct object = ParseJson(lines[0]);
  EXPECT_NE(Field(object, "msg").find("libprotobuf"), std::string::npos) << lines[0];
  EXPECT_NE(Field(object, "msg").find("UTF-8"), std::string::npos) << lines[0];
  EXPECT_EQ(Field(object, "level"), "error");
}

TEST_F(LoggingTest, UnknownFormatOrLevelIsRefusedNamingTheValueAndChangesNothing) {
  ASSERT_TRUE(ConfigureLogging("text", "error").ok());
  const std::shared_ptr<spdlog::logger> before = spdlog::default_logger();

  const absl::Status format = ConfigureLogging("xml", "info");
  EXPECT_EQ(format.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(format.message().find("\"xml\""), std::string::npos) << format;

  // spdlog itself would read an unknown level name as "off": a silent daemon.
  const absl::Status level = ConfigureLogging("json", "verbose");
  EXPECT_EQ(level.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(level.message().find("\"verbose\""), std::string::npos) << level;

  EXPECT_EQ(spdlog::default_logger(), before);
  EXPECT_EQ(spdlog::get_level(), spdlog::level::err);
}

TEST_F(LoggingTest, EveryDocumentedLevelNameIsAccepted) {
  for (const char* level : {"trace", "debug", "info", "warn", "warning", "error", "critical", "off"}) {
    EXPECT_TRUE(ConfigureLogging("text", level).ok()) << level;
  }
}

TEST(ChooseLogLevelTest, FlagWinsOverEnvironmentWhichWinsOverTheDefault) {
  EXPECT_EQ(ChooseLogLevel("debug", "error").level, "debug");
  EXPECT_EQ(ChooseLogLevel("debug", "error").origin, "--log-level");
  EXPECT_EQ(ChooseLogLevel("", "error").level, "error");
  EXPECT_EQ(ChooseLogLevel("", "error").origin, kLogLevelEnv);
  EXPECT_EQ(ChooseLogLevel("", "").level, "info");
  EXPECT_EQ(ChooseLogLevel("", nullptr).level, "info");
  EXPECT_EQ(ChooseLogLevel("", nullptr).origin, "default");
}

}  // namespace
}  // namespace arbiter::server
