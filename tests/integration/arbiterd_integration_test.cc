// The real arbiterd, driven through the client library over gRPC.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <google/protobuf/util/message_differencer.h>

#include "client/dtype_codec.h"
#include "client/matmul_check.h"
#include "tests/integration/daemon_fixture.h"

namespace arbiter::testing {
namespace {

using client::CheckMatmul;
using client::CheckOptions;
using client::CheckResult;
using client::Operands;
using client::RandomOperands;

// Overwrites the start of the cell pointer array of `table`'s b-tree root page in
// the stopped daemon's store with 0xff, as a torn write or a bad sector might.
void DamageRootPageOf(const std::string& path, const std::string& table) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  const std::string sql = "SELECT rootpage, (SELECT page_size FROM pragma_page_size) "
                          "FROM sqlite_schema WHERE name = '" + table + "'";
  ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW) << table;
  const int64_t root = sqlite3_column_int64(stmt, 0);
  const int64_t page_size = sqlite3_column_int64(stmt, 1);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  ASSERT_GT(root, 1);
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>((root - 1) * page_size + 8));
  const std::string junk(16, '\xff');
  file.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  ASSERT_TRUE(file.good());
}

class ArbiterdIntegrationTest : public DaemonFixture {
 protected:
  v1::ListCandidatesResponse Candidates() {
    v1::ListCandidatesResponse response;
    grpc::Status s = client_->ListCandidates(&response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  // The candidate's declared budget for `dtype`, as the daemon reports it.
  v1::AccuracyBudget BudgetOf(const std::string& name, v1::DType dtype) {
    const v1::ListCandidatesResponse listed = Candidates();
    for (const v1::CandidateInfo& c : listed.candidates()) {
      if (c.name() != name) continue;
      for (const v1::MemberContract& m : c.members()) {
        if (m.dtype() == dtype) return m.accuracy();
      }
    }
    ADD_FAILURE() << "candidate " << name << " has no " << v1::DType_Name(dtype) << " member";
    return client::DefaultBudget(dtype);
  }

  // Names of the candidates that are eligible here and have a member for `dtype`.
  std::set<std::string> EligibleFor(v1::DType dtype) {
    std::set<std::string> names;
    const v1::ListCandidatesResponse listed = Candidates();
    for (const v1::CandidateInfo& c : listed.candidates()) {
      if (!c.eligible()) continue;
      for (const v1::MemberContract& m : c.members()) {
        if (m.dtype() == dtype) names.insert(c.name());
      }
    }
    return names;
  }

  v1::SelectResponse Select(const v1::Problem& p) {
    v1::SelectRequest request;
    *request.mutable_problem() = p;
    v1::SelectResponse response;
    grpc::Status s = client_->Select(request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  int64_t Measurements() {
    v1::ServerInfoResponse info;
    grpc::Status s = client_->ServerInfo(&info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info.measurements();
  }

  v1::ListVerdictsResponse Verdicts() {
    v1::ListVerdictsResponse response;
    grpc::Status s = client_->ListVerdicts(v1::ListVerdictsRequest(), &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  // A Matmul with well-formed random operands.
  v1::MatmulRequest MatmulRequest(const v1::Problem& p, Operands* ops, uint64_t seed = 7) {
    *ops = RandomOperands(p, seed);
    v1::MatmulRequest request;
    *request.mutable_problem() = p;
    request.set_a(ops->a);
    request.set_b(ops->b);
    return request;
  }
};

// Checks the figures a verdict claims: the winner was timed, every eligible
// candidate appears (timed, or with the reason it was not), and `candidates`
// names exactly the raced set.
void ExpectVerdictConsistent(const v1::Verdict& v, const std::set<std::string>& eligible) {
  SCOPED_TRACE("verdict " + v.bucket() + " -> " + v.winner());
  EXPECT_EQ(v.source(), v1::VERDICT_SOURCE_MEASURED);
  EXPECT_FALSE(v.reason().empty());
  std::set<std::string> raced;
  std::vector<std::string> name_versions;
  const v1::CandidateResult* winner = nullptr;
  for (const v1::CandidateResult& r : v.results()) {
    raced.insert(r.name());
    name_versions.push_back(r.name() + "@" + std::to_string(r.version()));
    if (r.name() == v.winner()) winner = &r;
    if (r.state() == "timed") {
      EXPECT_GT(r.median_seconds(), 0) << r.name();
      EXPECT_GT(r.samples(), 0) << r.name();
    } else {
      EXPECT_FALSE(r.reason().empty()) << r.name() << " is " << r.state() << " without a reason";
    }
  }
  EXPECT_EQ(raced, eligible);
  ASSERT_NE(winner, nullptr) << "the winner is not among the results";
  EXPECT_EQ(winner->state(), "timed");
  EXPECT_EQ(winner->version(), v.winner_version());
  // Every raced candidate is named in `candidates`.
  for (const std::string& nv : name_versions) {
    EXPECT_NE(v.candidates().find(nv), std::string::npos) << nv << " not in " << v.candidates();
  }
}

TEST_F(ArbiterdIntegrationTest, MatmulMatchesLocalReferenceAtRaggedShapesInEveryDtype) {
  const v1::Problem problems[] = {
      MakeProblem(v1::DTYPE_F32, 64, 48, 100), MakeProblem(v1::DTYPE_F64, 17, 33, 9),
      MakeProblem(v1::DTYPE_F16, 31, 16, 40),  MakeProblem(v1::DTYPE_BF16, 8, 72, 24),
      MakeProblem(v1::DTYPE_F32, 1, 129, 7),
  };
  for (const v1::Problem& p : problems) {
    SCOPED_TRACE(v1::DType_Name(p.dtype()) + " " + std::to_string(p.m()) + "x" +
                 std::to_string(p.n()) + "x" + std::to_string(p.k()));
    Operands ops;
    v1::MatmulResponse response;
    grpc::Status s = client_->Matmul(MatmulRequest(p, &ops), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_FALSE(response.candidate().empty());
    EXPECT_FALSE(response.bucket().empty());
    EXPECT_GT(response.device_seconds(), 0);
    // Every element of C, against the candidate's own declared budget.
    CheckOptions all;
    all.samples = 0;
    const CheckResult check =
        CheckMatmul(p, ops, response.c(), BudgetOf(response.candidate(), p.dtype()), all);
    EXPECT_EQ(check.checked, p.m() * p.n());
    EXPECT_TRUE(check.passed()) << check.failures << " of " << check.checked
                                << " elements out of budget; first: " << check.first_failure;
  }
}

TEST_F(ArbiterdIntegrationTest, A256MiBOperandFitsTheDefaultMessageLimits) {
  // A is 8192x8192 f32 (256 MiB), as in an 8192^3 problem; N = 1 keeps the
  // CPU's work small. Tier default (tuning off): one run, no measurement.
  const v1::Problem p = MakeProblem(v1::DTYPE_F32, 8192, 1, 8192);
  Operands ops;
  v1::MatmulRequest request = MatmulRequest(p, &ops);
  request.set_tuning(v1::TUNING_POLICY_OFF);
  v1::MatmulResponse response;
  grpc::Status s = client_->Matmul(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.source(), v1::VERDICT_SOURCE_TIER_DEFAULT);
  const CheckResult check = CheckMatmul(p, ops, response.c(),
                                        BudgetOf(response.candidate(), p.dtype()), CheckOptions());
  EXPECT_TRUE(check.passed()) << check.first_failure;
  EXPECT_EQ(Measurements(), 0);
}

TEST_F(ArbiterdIntegrationTest, MatmulOnWrongOperandsWouldFailTheLocalCheck) {
  // The check above can fail: C computed from other operands does not pass.
  const v1::Problem p = MakeProblem(v1::DTYPE_F32, 24, 40, 56);
  Operands ops;
  v1::MatmulResponse response;
  ASSERT_TRUE(client_->Matmul(MatmulRequest(p, &ops, 1), &response).ok());
  const Operands other = RandomOperands(p, 2);
  const CheckResult check = CheckMatmul(p, other, response.c(),
                                        BudgetOf(response.candidate(), p.dtype()), CheckOptions());
  EXPECT_FALSE(check.passed());
}

TEST_F(ArbiterdIntegrationTest, SelectReturnsTheMeasuredWinnerAndItsVerdictAccountsForEveryEligibleCandidate) {
  const v1::Problem p = MakeProblem(v1::DTYPE_F32, 96, 80, 64);
  const v1::SelectResponse selected = Select(p);
  EXPECT_EQ(selected.source(), v1::VERDICT_SOURCE_MEASURED);
  ASSERT_TRUE(selected.has_verdict());
  EXPECT_EQ(selected.candidate(), selected.verdict().winner());
  EXPECT_EQ(selected.candidate_version(), selected.verdict().winner_version());
  EXPECT_EQ(selected.bucket(), selected.verdict().bucket());
  ExpectVerdictConsistent(selected.verdict(), EligibleFor(p.dtype()));

  // The same verdict is listed, with the same figures. Only a listing carries the
  // transfer record and only a fresh measurement its phase times (arbiter.proto).
  const v1::ListVerdictsResponse listed = Verdicts();
  ASSERT_EQ(listed.verdicts_size(), 1);
  EXPECT_TRUE(listed.verdicts(0).has_transfer());
  EXPECT_FALSE(selected.verdict().phase_seconds().empty());
  google::protobuf::util::MessageDifferencer same;
  const google::protobuf::Descriptor* verdict = v1::Verdict::descriptor();
  same.IgnoreField(verdict->FindFieldByName("transfer"));
  same.IgnoreField(verdict->FindFieldByName("phase_seconds"));
  std::string differences;
  same.ReportDifferencesToString(&differences);
  EXPECT_TRUE(same.Compare(listed.verdicts(0), selected.verdict())) << differences;
}

TEST_F(ArbiterdIntegrationTest, EveryListedVerdictIsConsistentWithItsFigures) {
  const v1::Problem problems[] = {MakeProblem(v1::DTYPE_F32, 32, 32, 32),
                                  MakeProblem(v1::DTYPE_F64, 16, 24, 8),
                                  MakeProblem(v1::DTYPE_BF16, 40, 8, 16)};
  for (const v1::Problem& p : problems) Select(p);
  const v1::ListVerdictsResponse listed = Verdicts();
  ASSERT_EQ(listed.verdicts_size(), 3);
  for (const v1::Verdict& v : listed.verdicts()) ExpectVerdictConsistent(v, EligibleFor(v.dtype()));

  // Filtering by dtype narrows the list to that dtype.
  v1::ListVerdictsRequest request;
  request.set_dtype(v1::DTYPE_F64);
  v1::ListVerdictsResponse f64;
  ASSERT_TRUE(client_->ListVerdicts(request, &f64).ok());
  ASSERT_EQ(f64.verdicts_size(), 1);
  EXPECT_EQ(f64.verdicts(0).dtype(), v1::DTYPE_F64);
}

TEST_F(ArbiterdIntegrationTest, ForceMakesSelectSayForcedAndUnforceRestoresTheVerdict) {
  const v1::Problem p = MakeProblem(v1::DTYPE_F32, 64, 64, 64);
  const v1::SelectResponse measured = Select(p);
  ASSERT_EQ(measured.source(), v1::VERDICT_SOURCE_MEASURED);
  // Force some eligible candidate other than the winner where there is one.
  std::string forced = measured.candidate();
  for (const std::string& name : EligibleFor(p.dtype())) {
    if (name != measured.candidate()) forced = name;
  }

  v1::ForceRequest force;
  *force.mutable_problem() = p;
  force.set_candidate(forced);
  force.set_reason("integration test");
  v1::ForceResponse force_response;
  grpc::Status s = client_->Force(force, &force_response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(force_response.bucket(), measured.bucket());

  const v1::SelectResponse after = Select(p);
  EXPECT_EQ(after.source(), v1::VERDICT_SOURCE_FORCED);
  EXPECT_EQ(after.candidate(), forced);
  const v1::ListVerdictsResponse listed = Verdicts();
  ASSERT_EQ(listed.forces_size(), 1);
  EXPECT_EQ(listed.forces(0).candidate(), forced);
  EXPECT_EQ(listed.forces(0).reason(), "integration test");
  EXPECT_EQ(listed.forces(0).bucket(), measured.bucket());

  // A Matmul in the forced bucket runs the forced candidate.
  Operands ops;
  v1::MatmulResponse ran;
  ASSERT_TRUE(client_->Matmul(MatmulRequest(p, &ops), &ran).ok());
  EXPECT_EQ(ran.candidate(), forced);
  EXPECT_EQ(ran.source(), v1::VERDICT_SOURCE_FORCED);

  v1::UnforceRequest unforce;
  *unforce.mutable_problem() = p;
  v1::UnforceResponse unforce_response;
  ASSERT_TRUE(client_->Unforce(unforce, &unforce_response).ok());
  EXPECT_TRUE(unforce_response.removed());
  const v1::SelectResponse restored = Select(p);
  EXPECT_EQ(restored.source(), v1::VERDICT_SOURCE_MEASURED);
  EXPECT_EQ(restored.candidate(), measured.candidate());
  EXPECT_EQ(Verdicts().forces_size(), 0);

  // Unforcing again removes nothing.
  ASSERT_TRUE(client_->Unforce(unforce, &unforce_response).ok());
  EXPECT_FALSE(unforce_response.removed());
}

TEST_F(ArbiterdIntegrationTest, ForcingACandidateThatDoesNotCoverTheBucketIsFailedPrecondition) {
  // A registered candidate without a member for some dtype.
  std::string name;
  v1::DType missing = v1::DTYPE_UNSPECIFIED;
  const v1::ListCandidatesResponse listed = Candidates();
  for (const v1::CandidateInfo& c : listed.candidates()) {
    std::set<int> dtypes;
    for (const v1::MemberContract& m : c.members()) dtypes.insert(m.dtype());
    for (v1::DType d : {v1::DTYPE_F32, v1::DTYPE_F64, v1::DTYPE_F16, v1::DTYPE_BF16}) {
      if (!dtypes.count(d) && name.empty()) {
        name = c.name();
        missing = d;
      }
    }
  }
  if (name.empty()) GTEST_SKIP() << "every candidate covers every dtype here";
  v1::ForceRequest force;
  *force.mutable_problem() = MakeProblem(missing, 32, 32, 32);
  force.set_candidate(name);
  force.set_reason("integration test");
  v1::ForceResponse response;
  grpc::Status s = client_->Force(force, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find(name), std::string::npos) << s.error_message();
  EXPECT_EQ(Verdicts().forces_size(), 0);
}

TEST_F(ArbiterdIntegrationTest, UnknownCandidateIsNotFound) {
  v1::ForceRequest force;
  *force.mutable_problem() = MakeProblem(v1::DTYPE_F32, 32, 32, 32);
  force.set_candidate("no_such_candidate");
  force.set_reason("integration test");
  v1::ForceResponse response;
  grpc::Status s = client_->Force(force, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_NE(s.error_message().find("no_such_candidate"), std::string::npos);

  v1::QuarantineRequest quarantine;
  quarantine.set_candidate("no_such_candidate");
  quarantine.set_reason("integration test");
  s = client_->Quarantine(quarantine);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
}

TEST_F(ArbiterdIntegrationTest, BadInputIsInvalidArgumentNamingWhatWasExpectedAndTheDaemonKeepsServing) {
  const v1::Problem p = MakeProblem(v1::DTYPE_F32, 48, 40, 100);
  Operands ops;
  v1::MatmulResponse response;

  // A one element short: the message names the expected byte count and how it was computed.
  v1::MatmulRequest short_a = MatmulRequest(p, &ops);
  short_a.mutable_a()->resize(short_a.a().size() - 4);
  grpc::Status s = client_->Matmul(short_a, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("a: expected 19200 bytes"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("48*100*4"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("got 19196"), std::string::npos) << s.error_message();

  v1::MatmulRequest long_b = MatmulRequest(p, &ops);
  long_b.mutable_b()->append(8, '\0');
  s = client_->Matmul(long_b, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("b: expected 16000 bytes"), std::string::npos)
      << s.error_message();

  // Unspecified and unknown dtypes name the accepted values.
  v1::MatmulRequest no_dtype = MatmulRequest(p, &ops);
  no_dtype.mutable_problem()->set_dtype(v1::DTYPE_UNSPECIFIED);
  s = client_->Matmul(no_dtype, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("bf16"), std::string::npos) << s.error_message();
  v1::MatmulRequest bad_dtype = no_dtype;
  bad_dtype.mutable_problem()->set_dtype(static_cast<v1::DType>(42));
  s = client_->Matmul(bad_dtype, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("42"), std::string::npos) << s.error_message();

  // Non-positive and oversized dimensions, before anything is allocated.
  for (const v1::Problem& bad : {MakeProblem(v1::DTYPE_F32, 0, 8, 8),
                                 MakeProblem(v1::DTYPE_F32, 8, -3, 8),
                                 MakeProblem(v1::DTYPE_F32, 8, 8, int64_t{1} << 40)}) {
    v1::MatmulRequest request;
    *request.mutable_problem() = bad;
    s = client_->Matmul(request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    v1::SelectRequest select;
    *select.mutable_problem() = bad;
    v1::SelectResponse selected;
    s = client_->Select(select, &selected);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }

  // Still serving, and still computing correctly.
  client::HealthStatus health;
  ASSERT_TRUE(client_->Health("", &health).ok());
  EXPECT_EQ(health, client::HealthStatus::kServing);
  ASSERT_TRUE(client_->Matmul(MatmulRequest(p, &ops), &response).ok());
  EXPECT_TRUE(CheckMatmul(p, ops, response.c(), BudgetOf(response.candidate(), p.dtype()),
                          CheckOptions())
                  .passed());
}

TEST_F(ArbiterdIntegrationTest, InvalidateRemovesTheVerdictSoTheNextSelectMeasuresAgain) {
  const v1::Problem p = MakeProblem(v1::DTYPE_F32, 40, 56, 72);
  Select(p);
  const int64_t measured_once = Measurements();
  EXPECT_GE(measured_once, 1);
  // A stored verdict is served without measuring again.
  EXPECT_EQ(Select(p).source(), v1::VERDICT_SOURCE_MEASURED);
  EXPECT_EQ(Measurements(), measured_once);

  v1::InvalidateRequest nothing;
  v1::InvalidateResponse removed;
  EXPECT_EQ(client_->Invalidate(nothing, &removed).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::InvalidateRequest by_problem;
  *by_problem.mutable_problem() = p;
  ASSERT_TRUE(client_->Invalidate(by_problem, &removed).ok());
  EXPECT_EQ(removed.removed(), 1);
  EXPECT_EQ(Verdicts().verdicts_size(), 0);

  EXPECT_EQ(Select(p).source(), v1::VERDICT_SOURCE_MEASURED);
  EXPECT_EQ(Measurements(), measured_once + 1);

  v1::InvalidateRequest all;
  all.set_all(true);
  ASSERT_TRUE(client_->Invalidate(all, &removed).ok());
  EXPECT_EQ(removed.removed(), 1);
  EXPECT_EQ(Verdicts().verdicts_size(), 0);
}

TEST_F(ArbiterdIntegrationTest, AsyncPolicyAnswersWithTheTierDefaultThenServesOneMeasurement) {
  const v1::Problem p = MakeProblem(v1::DTYPE_F32, 48, 80, 96);
  v1::SelectRequest request;
  *request.mutable_problem() = p;

  // Tuning off: the tier default, and nothing is measured.
  request.set_tuning(v1::TUNING_POLICY_OFF);
  v1::SelectResponse off;
  ASSERT_TRUE(client_->Select(request, &off).ok());
  EXPECT_EQ(off.source(), v1::VERDICT_SOURCE_TIER_DEFAULT);
  EXPECT_EQ(Measurements(), 0);

  // The tier default is the highest-tier candidate that can run the problem here.
  const v1::ListCandidatesResponse listed = Candidates();
  int best_tier = 0;
  for (const v1::CandidateInfo& c : listed.candidates()) {
    if (c.eligible()) best_tier = std::max(best_tier, c.tier());
  }
  for (const v1::CandidateInfo& c : listed.candidates()) {
    if (c.name() == off.candidate()) {
      EXPECT_EQ(c.tier(), best_tier);
    }
  }

  // Async: answered at once with the same default (provisional), measured in the background.
  request.set_tuning(v1::TUNING_POLICY_ASYNC);
  v1::SelectResponse first;
  ASSERT_TRUE(client_->Select(request, &first).ok());
  if (first.source() == v1::VERDICT_SOURCE_PROVISIONAL) {
    EXPECT_EQ(first.candidate(), off.candidate());
  } else {
    EXPECT_EQ(first.source(), v1::VERDICT_SOURCE_MEASURED);  // the measurement already finished
  }
  // A synchronous request for the same bucket joins the background measurement (or, if the
  // queued one has not started, measures and the queued one is dropped): either way, one.
  request.set_tuning(v1::TUNING_POLICY_SYNC);
  v1::SelectResponse later;
  ASSERT_TRUE(client_->Select(request, &later).ok());
  ASSERT_EQ(later.source(), v1::VERDICT_SOURCE_MEASURED);
  EXPECT_EQ(later.verdict().winner(), later.candidate());
  // However many requests asked while it ran, the bucket was measured once.
  EXPECT_EQ(Measurements(), 1);
}

TEST_F(ArbiterdIntegrationTest, TuneStreamsOneProgressMessagePerProblemInOrder) {
  v1::TuneRequest request;
  *request.add_problems() = MakeProblem(v1::DTYPE_F32, 16, 16, 16);
  *request.add_problems() = MakeProblem(v1::DTYPE_F16, 24, 8, 40);
  std::vector<v1::TuneProgress> seen;
  grpc::Status s = client_->Tune(request, [&](const v1::TuneProgress& p) { seen.push_back(p); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(seen.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(seen[i].index(), i);
    EXPECT_EQ(seen[i].total(), 2);
    EXPECT_TRUE(seen[i].error().empty()) << seen[i].error();
    ASSERT_TRUE(seen[i].has_verdict());
    ExpectVerdictConsistent(seen[i].verdict(), EligibleFor(request.problems(i).dtype()));
  }
  EXPECT_EQ(Verdicts().verdicts_size(), 2);

  // A bad problem anywhere refuses the whole call before anything is measured.
  const int64_t before = Measurements();
  v1::TuneRequest bad;
  *bad.add_problems() = MakeProblem(v1::DTYPE_F32, 8, 8, 8);
  *bad.add_problems() = MakeProblem(v1::DTYPE_UNSPECIFIED, 8, 8, 8);
  s = client_->Tune(bad, [](const v1::TuneProgress&) {});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("problems[1]"), std::string::npos) << s.error_message();
  EXPECT_EQ(Measurements(), before);
}

TEST_F(ArbiterdIntegrationTest, QuarantineIsListedOnTheCandidateAndCleared) {
  const std::string name = Candidates().candidates(0).name();
  v1::QuarantineRequest quarantine;
  quarantine.set_candidate(name);
  quarantine.set_scope("f64");
  quarantine.set_reason("integration test");
  ASSERT_TRUE(client_->Quarantine(quarantine).ok());
  v1::ListQuarantineResponse listed;
  ASSERT_TRUE(client_->ListQuarantine(&listed).ok());
  ASSERT_EQ(listed.entries_size(), 1);
  EXPECT_EQ(listed.entries(0).candidate(), name);
  EXPECT_EQ(listed.entries(0).scope(), "f64");
  EXPECT_EQ(Candidates().candidates(0).quarantine_size(), 1);

  quarantine.set_scope("not-a-scope");
  EXPECT_EQ(client_->Quarantine(quarantine).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::ClearQuarantineResponse cleared;
  ASSERT_TRUE(client_->ClearQuarantine(v1::ClearQuarantineRequest(), &cleared).ok());
  EXPECT_EQ(cleared.removed(), 1);
  ASSERT_TRUE(client_->ListQuarantine(&listed).ok());
  EXPECT_EQ(listed.entries_size(), 0);
}

TEST_F(ArbiterdIntegrationTest, ServerInfoDescribesTheCpuDaemon) {
  v1::ServerInfoResponse info;
  ASSERT_TRUE(client_->ServerInfo(&info).ok());
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_EQ(info.store_path(), store_path_);
  EXPECT_EQ(info.tuning(), "sync");
  EXPECT_EQ(info.candidates(), Candidates().candidates_size());
  EXPECT_FALSE(info.fingerprint().empty());
  EXPECT_FALSE(info.version().empty());
  EXPECT_EQ(info.verdicts(), 0);
  EXPECT_EQ(info.measurements(), 0);
}

TEST_F(ArbiterdIntegrationTest, RestartOnTheSameStoreServesStoredVerdictsWithoutMeasuring) {
  const v1::Problem stored = MakeProblem(v1::DTYPE_F32, 48, 48, 48);
  Select(stored);
  Select(MakeProblem(v1::DTYPE_BF16, 16, 32, 24));
  v1::ForceRequest force;
  *force.mutable_problem() = MakeProblem(v1::DTYPE_F64, 8, 8, 8);
  force.set_candidate(*EligibleFor(v1::DTYPE_F64).begin());
  force.set_reason("survives a restart");
  v1::ForceResponse forced;
  ASSERT_TRUE(client_->Force(force, &forced).ok());
  const v1::ListVerdictsResponse before = Verdicts();
  ASSERT_EQ(before.verdicts_size(), 2);

  ASSERT_NO_FATAL_FAILURE(StopDaemon());
  ASSERT_NO_FATAL_FAILURE(StartDaemon());

  EXPECT_EQ(Measurements(), 0);
  const v1::ListVerdictsResponse after = Verdicts();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, after))
      << "before:\n" << before.DebugString() << "after:\n" << after.DebugString();

  // Served from the store: the stored verdict, no new measurement.
  const v1::SelectResponse selected = Select(stored);
  EXPECT_EQ(selected.source(), v1::VERDICT_SOURCE_MEASURED);
  ASSERT_TRUE(selected.has_verdict());
  EXPECT_EQ(selected.verdict().created_unix(), before.verdicts(0).bucket() == selected.bucket()
                                                   ? before.verdicts(0).created_unix()
                                                   : before.verdicts(1).created_unix());
  EXPECT_EQ(Measurements(), 0);
  EXPECT_EQ(Select(force.problem()).source(), v1::VERDICT_SOURCE_FORCED);
}

// A store with a damaged page used to be opened and SERVING, then ListVerdicts
// failed with DATA_LOSS. arbiterd refuses it at start, saying why, and leaves
// the file for the operator (deploy/README.md: move it aside, or restore it).
TEST_F(ArbiterdIntegrationTest, AStoreWithADamagedPageIsRefusedAtStartSayingWhy) {
  v1::ForceRequest force;
  *force.mutable_problem() = MakeProblem(v1::DTYPE_F64, 8, 8, 8);
  force.set_candidate(*EligibleFor(v1::DTYPE_F64).begin());
  force.set_reason("a row in the forces table");
  v1::ForceResponse forced;
  ASSERT_TRUE(client_->Force(force, &forced).ok());
  ASSERT_NO_FATAL_FAILURE(StopDaemon());
  ASSERT_NO_FATAL_FAILURE(DamageRootPageOf(store_path_, "forces"));

  ArbiterdOptions options;
  options.binary = ARBITERD_PATH;
  options.store_path = store_path_;
  std::string error;
  const std::unique_ptr<ArbiterdProcess> refused = ArbiterdProcess::Start(options, &error);
  EXPECT_EQ(refused, nullptr) << "arbiterd started SERVING on a damaged store";
  EXPECT_NE(error.find("arbiterd exited"), std::string::npos) << error;
  EXPECT_NE(error.find("quick_check"), std::string::npos) << error;
}

}  // namespace
}  // namespace arbiter::testing
