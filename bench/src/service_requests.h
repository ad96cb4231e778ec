// The service section's Matmul requests, and the check of their replies against
// the reference: shared by its bytes-path, wire and zero-copy rows.
// Thread-safe: free functions on their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "client/arbiter_client.h"
#include "client/matmul_check.h"
#include "engine/problem.h"
#include "engine/status.h"

namespace arbiter::bench {

// `p` as the wire names it.
v1::Problem WireProblem(const Problem& p);

// A bytes-path Matmul of `p` on the operands `a` and `b`.
v1::MatmulRequest BytesRequest(const Problem& p, const std::vector<uint8_t>& a,
                               const std::vector<uint8_t>& b);

// The reply's C (a sample of its rows) against the reference of `ops`, within
// the budget its candidate declares: a fast wrong answer is no answer. `call`
// names the call in the error.
absl::Status CheckReply(client::ArbiterClient& ctl, const v1::Problem& problem,
                        const client::Operands& ops, const std::string& c,
                        const std::string& candidate, const std::string& call);

}  // namespace arbiter::bench
