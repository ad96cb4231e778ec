// The real arbiterd's logs: --log-format=json gives one JSON object per line
// (checked by two parsers, protobuf's and Python's strict json module), even
// for messages carrying quotes and newlines from a client; the level comes from
// --log-level, else ARBITER_LOG_LEVEL; bad values of these and of the other
// flags stop the daemon at start.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "tests/integration/daemon_fixture.h"

namespace arbiter::testing {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct Finished {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` through the shell to completion.
Finished Shell(const std::string& command) {
  Finished run;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) run.output.append(buf.data(), n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// arbiterd with ARBITER_LOG_LEVEL set to `env` (unset when empty) and `flags`,
// on a store it cannot open: it logs its backend at info, then stops with a
// critical line - enough to see which levels got through, with no server.
Finished FailingStart(const std::string& env, const std::string& flags) {
  const std::string environment =
      env.empty() ? "env -u ARBITER_LOG_LEVEL" : "env ARBITER_LOG_LEVEL='" + env + "'";
  return Shell(environment + " " + ARBITERD_PATH +
               " --listen=127.0.0.1:0 --backend=cpu --store=/nonexistent-arbiter-dir/v.db " + flags);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class JsonLogsTest : public DaemonFixture {
 protected:
  void SetUp() override {
    extra_args_ = {"--log-format=json"};
    DaemonFixture::SetUp();
  }
};

// Parses `line` as a JSON object with protobuf's parser; fails the test when it is not one.
google::protobuf::Struct ParseJson(const std::string& line) {
  google::protobuf::Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(line, &object);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n  line: " << line;
  return object;
}

std::string Field(const google::protobuf::Struct& object, const std::string& name) {
  const auto it = object.fields().find(name);
  return it == object.fields().end() ? "<missing>" : it->second.string_value();
}

TEST_F(JsonLogsTest, EveryLineOfARunningDaemonIsAJsonObjectWithItsMessageIntact) {
  // An audit line quoting an operator's reason: quotes, a backslash, a newline, a tab.
  const std::string reason = "ticket \"GPU-7\": wrong\\tiles\nsee\tnotes";
  v1::QuarantineRequest request;
  request.set_candidate("cpu_blocked");
  request.set_reason(reason);
  const grpc::Status quarantined = client_->Quarantine(request);
  ASSERT_TRUE(quarantined.ok()) << quarantined.error_message();
  client_.reset();
  ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->ReadLog();
  const std::string log = daemon_->ReadLog();

  // Python's json module is strict (no raw control characters in strings).
  const Finished python =
      Shell(std::string(PYTHON3_PATH) +
            " -c 'import json, sys; [json.loads(l) for l in sys.stdin]' < '" + daemon_->log_path() +
            "'");
  EXPECT_EQ(python.exit_code, 0) << python.output << "\nlog:\n" << log;

  bool listening = false, audited = false, stopped = false;
  for (const std::string& line : Lines(log)) {
    const google::protobuf::Struct object = ParseJson(line);
    EXPECT_EQ(Field(object, "logger"), "arbiterd") << line;
    EXPECT_NE(Field(object, "time"), "<missing>") << line;
    EXPECT_NE(Field(object, "level"), "<missing>") << line;
    const std::string msg = Field(object, "msg");
    listening |= Contains(msg, "listening on 127.0.0.1:");
    audited |= Contains(msg, "admin quarantine (fleet) from ") && Contains(msg, reason);
    stopped |= Contains(msg, "verdict store ") && Contains(msg, " closed");
  }
  EXPECT_TRUE(listening) << log;
  EXPECT_TRUE(audited) << "no audit line carrying the reason intact:\n" << log;
  EXPECT_TRUE(stopped) << log;
}

// An unauthenticated client's Admin string that is not UTF-8: libprotobuf
// reports it, through the daemon's logger, so the log stays JSON line by line.
TEST_F(JsonLogsTest, AnAdminStringThatIsNotUtf8LeavesEveryLineJson) {
  v1::QuarantineRequest request;
  request.set_candidate("cpu_blocked");
  request.set_reason("bad \xff\xfe bytes");
  const grpc::Status status = client_->Quarantine(request);
  EXPECT_FALSE(status.ok());  // the request does not parse
  client_.reset();
  ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->ReadLog();
  const std::string log = daemon_->ReadLog();
  const Finished python =
      Shell(std::string(PYTHON3_PATH) +
            " -c 'import json, sys; [json.loads(l) for l in sys.stdin]' < '" + daemon_->log_path() +
            "'");
  EXPECT_EQ(python.exit_code, 0) << python.output << "\nlog:\n" << log;
  bool reported = false;
  for (const std::string& line : Lines(log)) {
    const std::string msg = Field(ParseJson(line), "msg");
    reported |= Contains(msg, "libprotobuf") && Contains(msg, "UTF-8");
  }
  EXPECT_TRUE(reported) << "libprotobuf's complaint is not in the log:\n" << log;
}

class TextLogsTest : public DaemonFixture {
 protected:
  void SetUp() override {
    extra_args_ = {"--log-format=text"};
    DaemonFixture::SetUp();
  }
};

// In text, a client's string with newlines (in an audit line, and in a refusal
// naming an unknown candidate) stays inside its line, escaped.
TEST_F(TextLogsTest, ClientStringsCannotStartANewLine) {
  const std::string forged = "\n[2099-01-01 00:00:00.000] [critical] forged by a client";
  v1::QuarantineRequest request;
  request.set_candidate("cpu_blocked");
  request.set_reason("ticket" + forged);
  ASSERT_TRUE(client_->Quarantine(request).ok());
  request.set_candidate("nobody" + forged);
  EXPECT_FALSE(client_->Quarantine(request).ok());
  client_.reset();
  ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->ReadLog();
  const std::string log = daemon_->ReadLog();
  int escaped = 0;
  for (const std::string& line : Lines(log)) {
    EXPECT_EQ(line.rfind("[2099-", 0), std::string::npos) << "a forged line:\n" << log;
    EXPECT_TRUE(std::regex_search(line, std::regex(R"(^\[\d{4}-\d{2}-\d{2} [0-9:.]+\] \[)")))
        << "not a log line of the daemon: " << line;
    escaped += Contains(line, "\\n[2099-01-01 00:00:00.000] [critical] forged by a client");
  }
  EXPECT_EQ(escaped, 2) << log;
}

TEST(LogLevelTest, EnvironmentSetsTheLevelWhenTheFlagIsAbsent) {
  const Finished info = FailingStart("info", "");
  EXPECT_EQ(info.exit_code, 1) << info.output;
  EXPECT_TRUE(Contains(info.output, "backend cpu:")) << info.output;

  const Finished warn = FailingStart("warn", "");
  EXPECT_EQ(warn.exit_code, 1) << warn.output;
  EXPECT_FALSE(Contains(warn.output, "backend cpu:")) << warn.output;
  EXPECT_TRUE(Contains(warn.output, "failed to start")) << warn.output;

  const Finished unset = FailingStart("", "");  // the default, info
  EXPECT_TRUE(Contains(unset.output, "backend cpu:")) << unset.output;
}

TEST(LogLevelTest, FlagWinsOverTheEnvironment) {
  const Finished quieter = FailingStart("info", "--log-level=warn");
  EXPECT_FALSE(Contains(quieter.output, "backend cpu:")) << quieter.output;
  EXPECT_TRUE(Contains(quieter.output, "failed to start")) << quieter.output;

  const Finished louder = FailingStart("error", "--log-level=info");
  EXPECT_TRUE(Contains(louder.output, "backend cpu:")) << louder.output;
}

TEST(LogLevelTest, UnknownLevelOrFormatStopsTheDaemonNamingTheValue) {
  const Finished env = FailingStart("verbose", "");
  EXPECT_EQ(env.exit_code, 2) << env.output;
  EXPECT_TRUE(Contains(env.output, "\"verbose\"")) << env.output;
  EXPECT_TRUE(Contains(env.output, "ARBITER_LOG_LEVEL")) << env.output;

  const Finished flag = FailingStart("", "--log-level=loud");
  EXPECT_EQ(flag.exit_code, 2) << flag.output;
  EXPECT_TRUE(Contains(flag.output, "\"loud\"")) << flag.output;

  const Finished format = FailingStart("", "--log-format=xml");
  EXPECT_EQ(format.exit_code, 2) << format.output;
  EXPECT_TRUE(Contains(format.output, "\"xml\"")) << format.output;
}

// --backend, --tuning and --max-queue parse into what the daemon uses (an enum,
// an unsigned count): a value outside it stops arbiterd before anything starts.
TEST(FlagTest, AValueOutsideAFlagsTypeStopsTheDaemonBeforeItStartsNamingTheFlag) {
  const std::pair<std::string, std::string> bad[] = {
      {"--backend=tpu", "'backend'"}, {"--tuning=eager", "'tuning'"},
      {"--max-queue=-1", "'max_queue'"}, {"--workers=two", "'workers'"}};
  for (const auto& [flag, name] : bad) {
    const Finished run = FailingStart("", flag);
    EXPECT_NE(run.exit_code, 0) << flag << ": " << run.output;
    EXPECT_TRUE(Contains(run.output, name)) << flag << ": " << run.output;
    EXPECT_FALSE(Contains(run.output, "backend cpu:")) << flag << " started a backend: " << run.output;
  }
}

TEST(LogLevelTest, JsonFormatAppliesFromTheFirstLine) {
  const Finished run = FailingStart("", "--log-format=json");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  const std::vector<std::string> lines = Lines(run.output);
  ASSERT_FALSE(lines.empty());
  for (const std::string& line : lines) {
    const google::protobuf::Struct object = ParseJson(line);
    EXPECT_NE(Field(object, "msg"), "<missing>") << line;
  }
  EXPECT_EQ(Field(ParseJson(lines.back()), "level"), "critical") << run.output;
}

}  // namespace
}  // namespace arbiter::testing
