#include "kernels/registry/cpu_candidates.h"

#include "kernels/cpu_blocked/cpu_blocked.h"
#include "kernels/cpu_reference/cpu_reference.h"
#include "kernels/openblas/openblas.h"

namespace arbiter {

std::vector<CandidateSpec> CpuCandidates(int threads) {
  std::vector<CandidateSpec> candidates;
  candidates.push_back(MakeCpuReferenceCandidate());
  candidates.push_back(MakeCpuBlockedCandidate({.threads = threads}));
  candidates.push_back(MakeOpenBlasCandidate());
  return candidates;
}

}  // namespace arbiter
