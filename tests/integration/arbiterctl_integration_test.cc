// arbiterctl as operators and scripts run it: a subprocess against a real
// arbiterd, checked by exit code and by its --json output parsed back into
// the wire messages.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "tests/integration/daemon_fixture.h"

namespace arbiter::testing {
namespace {

struct CtlResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class ArbiterctlIntegrationTest : public DaemonFixture {
 protected:
  // Runs arbiterctl against the fixture's daemon (or `server`).
  CtlResult Ctl(const std::string& args, const std::string& server = "") {
    const std::string err_path = store_dir_ + "/arbiterctl.err";
    const std::string command = std::string(ARBITERCTL_PATH) + " --server " +
                                (server.empty() ? daemon_->address() : server) + " " + args +
                                " 2>" + err_path;
    CtlResult result;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen failed: " << command;
      return result;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) result.out.append(buf, n);
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream err(err_path);
    std::stringstream err_text;
    err_text << err.rdbuf();
    result.err = err_text.str();
    return result;
  }

  template <typename Message>
  Message ParseJson(const std::string& text) {
    Message message;
    const auto status = google::protobuf::util::JsonStringToMessage(text, &message);
    EXPECT_TRUE(status.ok()) << status.ToString() << " in:\n" << text;
    return message;
  }
};

TEST_F(ArbiterctlIntegrationTest, MatmulJsonReportsTheCandidateAndAPassingCheck) {
  const CtlResult r = Ctl("--json matmul --m 40 --n 24 --k 56 --dtype f32 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto out = ParseJson<google::protobuf::Struct>(r.out);
  const auto& fields = out.fields();
  ASSERT_TRUE(fields.count("candidate"));
  EXPECT_FALSE(fields.at("candidate").string_value().empty());
  EXPECT_EQ(fields.at("source").string_value(), "measured");
  EXPECT_FALSE(fields.at("bucket").string_value().empty());
  const auto& check = fields.at("check").struct_value().fields();
  EXPECT_TRUE(check.at("passed").bool_value());
  EXPECT_EQ(check.at("checked").number_value(), 64);
  EXPECT_EQ(check.at("failures").number_value(), 0);
}

TEST_F(ArbiterctlIntegrationTest, MatmulTablePrintsEveryField) {
  const CtlResult r = Ctl("matmul --m 17 --n 9 --k 33 --dtype bf16");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (const char* field : {"candidate", "source", "bucket", "device time", "check"}) {
    EXPECT_NE(r.out.find(field), std::string::npos) << field << " missing in:\n" << r.out;
  }
  EXPECT_NE(r.out.find("ok: 64 elements"), std::string::npos) << r.out;
}

TEST_F(ArbiterctlIntegrationTest, SelectThenForceThenVerdictsJson) {
  CtlResult r = Ctl("--json select --m 64 --n 32 --k 16 --dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto selected = ParseJson<v1::SelectResponse>(r.out);
  EXPECT_EQ(selected.source(), v1::VERDICT_SOURCE_MEASURED);
  ASSERT_TRUE(selected.has_verdict());

  r = Ctl("--json force --m 64 --n 32 --k 16 --dtype f32 --candidate " + selected.candidate() +
          " --reason pinned-by-ctl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseJson<v1::ForceResponse>(r.out).bucket(), selected.bucket());

  r = Ctl("--json select --m 64 --n 32 --k 16 --dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseJson<v1::SelectResponse>(r.out).source(), v1::VERDICT_SOURCE_FORCED);

  r = Ctl("--json verdicts");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto verdicts = ParseJson<v1::ListVerdictsResponse>(r.out);
  ASSERT_EQ(verdicts.verdicts_size(), 1);
  EXPECT_EQ(verdicts.verdicts(0).winner(), selected.candidate());
  ASSERT_EQ(verdicts.forces_size(), 1);
  EXPECT_EQ(verdicts.forces(0).reason(), "pinned-by-ctl");

  r = Ctl("unforce --m 64 --n 32 --k 16 --dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("removed the force"), std::string::npos) << r.out;
}

TEST_F(ArbiterctlIntegrationTest, AnExactForcePinsOneShapeIsListedWithItAndIsRemovedAlone) {
  CtlResult r = Ctl("--json select --m 64 --n 32 --k 16 --dtype f32");  // measures the bucket
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Ctl("--json force --m 48 --n 32 --k 16 --dtype f32 --candidate cpu_reference"
          " --reason one-shape --exact");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto forced = ParseJson<v1::ForceResponse>(r.out);
  EXPECT_EQ(forced.scope(), "48x32x16");

  r = Ctl("--json select --m 48 --n 32 --k 16 --dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto at = ParseJson<v1::SelectResponse>(r.out);
  EXPECT_EQ(at.source(), v1::VERDICT_SOURCE_FORCED);
  EXPECT_EQ(at.candidate(), "cpu_reference");
  EXPECT_EQ(at.bucket(), forced.bucket());
  r = Ctl("--json select --m 64 --n 32 --k 16 --dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseJson<v1::SelectResponse>(r.out).source(), v1::VERDICT_SOURCE_MEASURED)
      << "the bucket's other shapes keep its verdict";

  r = Ctl("verdicts");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("48x32x16"), std::string::npos) << "the force's shape listed:\n" << r.out;
  r = Ctl("unforce --m 48 --n 32 --k 16 --dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("no force on"), std::string::npos) << "the bucket had none:\n" << r.out;
  r = Ctl("unforce --m 48 --n 32 --k 16 --dtype f32 --exact");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("removed the force on"), std::string::npos) << r.out;
  r = Ctl("--json select --m 48 --n 32 --k 16 --dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(ParseJson<v1::SelectResponse>(r.out).source(), v1::VERDICT_SOURCE_FORCED);
}

TEST_F(ArbiterctlIntegrationTest, DaemonErrorsExitOneWithTheCodeOnStderr) {
  const CtlResult r = Ctl(
      "force --m 8 --n 8 --k 8 --candidate no_such_candidate --reason testing");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("NOT_FOUND"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(ArbiterctlIntegrationTest, UsageErrorsExitTwoWithoutCallingTheDaemon) {
  EXPECT_EQ(Ctl("matmul --m 8 --n 8").exit_code, 2);           // --k missing
  EXPECT_EQ(Ctl("matmul --m 8 --n 8 --k 8 --dtype f8").exit_code, 2);
  EXPECT_EQ(Ctl("select --m 8 --n 8 --k 8 --bogus 1").exit_code, 2);
  EXPECT_EQ(Ctl("no-such-command").exit_code, 2);
  EXPECT_EQ(Ctl("invalidate").exit_code, 2);                   // nothing named
  EXPECT_EQ(Ctl("tune").exit_code, 2);                         // no --shape
}

TEST_F(ArbiterctlIntegrationTest, TuneStreamsAProgressLinePerShape) {
  const CtlResult r = Ctl("tune --shape 16x16x16 --shape bf16:8x24x40");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[1/2] f32 16x16x16 -> "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[2/2] bf16 8x24x40 -> "), std::string::npos) << r.out;
}

TEST_F(ArbiterctlIntegrationTest, HealthExitsZeroOnlyWhileServing) {
  CtlResult r = Ctl("health");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  const std::string address = daemon_->address();
  ASSERT_NO_FATAL_FAILURE(StopDaemon());
  r = Ctl("health", address);
  EXPECT_EQ(r.exit_code, 4) << r.out;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());  // TearDown expects a daemon
}

TEST_F(ArbiterctlIntegrationTest, CandidatesAndInfoPrintTablesAndJson) {
  CtlResult r = Ctl("--json candidates");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto candidates = ParseJson<v1::ListCandidatesResponse>(r.out);
  ASSERT_GT(candidates.candidates_size(), 0);
  r = Ctl("candidates");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const v1::CandidateInfo& c : candidates.candidates()) {
    EXPECT_NE(r.out.find(c.name()), std::string::npos) << c.name() << " missing in:\n" << r.out;
  }
  r = Ctl("--json info");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseJson<v1::ServerInfoResponse>(r.out).backend(), "cpu");
}

TEST_F(ArbiterctlIntegrationTest, TokenFileIsSentAsBearerTokenToAGuardedDaemon) {
  const std::string token_file = store_dir_ + "/admin-token";
  std::ofstream(token_file) << "s3cret-token-for-tests\n";
  const std::string wrong_file = store_dir_ + "/wrong-token";
  std::ofstream(wrong_file) << "not-the-token\n";
  ASSERT_NO_FATAL_FAILURE(StopDaemon());
  extra_args_ = {"--admin-token-file=" + token_file};
  ASSERT_NO_FATAL_FAILURE(StartDaemon());

  CtlResult r = Ctl("candidates");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("UNAUTHENTICATED"), std::string::npos) << r.err;
  r = Ctl("--token-file " + wrong_file + " candidates");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("PERMISSION_DENIED"), std::string::npos) << r.err;
  r = Ctl("--token-file " + token_file + " candidates");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The token never shows up in the daemon's log.
  EXPECT_EQ(daemon_->ReadLog().find("s3cret-token-for-tests"), std::string::npos);
  // Dispatch is not guarded.
  r = Ctl("select --m 8 --n 8 --k 8");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace arbiter::testing
