#include "bench/src/service_requests.h"

#include "absl/strings/str_cat.h"

namespace arbiter::bench {
namespace {

v1::DType WireDType(DType d) { return static_cast<v1::DType>(static_cast<int>(d)); }

// The accuracy budget `candidate` declares for `dtype` (ListCandidates), which
// its results are checked against; the client's default when it is not listed.
v1::AccuracyBudget BudgetOf(client::ArbiterClient& ctl, const std::string& candidate,
                            v1::DType dtype) {
  v1::ListCandidatesResponse candidates;
  if (ctl.ListCandidates(&candidates).ok()) {
    for (const v1::CandidateInfo& c : candidates.candidates()) {
      if (c.name() != candidate) continue;
      for (const v1::MemberContract& member : c.members()) {
        if (member.dtype() == dtype) return member.accuracy();
      }
    }
  }
  return client::DefaultBudget(dtype);
}

}  // namespace

v1::Problem WireProblem(const Problem& p) {
  v1::Problem out;
  out.set_dtype(WireDType(p.dtype));
  out.set_m(p.m);
  out.set_n(p.n);
  out.set_k(p.k);
  return out;
}

v1::MatmulRequest BytesRequest(const Problem& p, const std::vector<uint8_t>& a,
                               const std::vector<uint8_t>& b) {
  v1::MatmulRequest req;
  *req.mutable_problem() = WireProblem(p);
  req.set_a(a.data(), a.size());
  req.set_b(b.data(), b.size());
  return req;
}

absl::Status CheckReply(client::ArbiterClient& ctl, const v1::Problem& problem,
                        const client::Operands& ops, const std::string& c,
                        const std::string& candidate, const std::string& call) {
  const client::CheckResult check = client::CheckMatmul(
      problem, ops, c, BudgetOf(ctl, candidate, problem.dtype()), client::CheckOptions{});
  if (!check.passed()) {
    return absl::DataLossError(
        absl::StrCat(call, " by ", candidate, ": C is wrong: ", check.first_failure));
  }
  return absl::OkStatus();
}

}  // namespace arbiter::bench
