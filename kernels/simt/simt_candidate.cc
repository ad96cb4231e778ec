#include "kernels/simt/simt_candidate.h"

#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels/simt/simt.h"

namespace arbiter {
namespace {

using kernels::LaunchSimt;
using kernels::SimtArgs;
using kernels::kSimtBudgetAbs;
using kernels::kSimtBudgetRel;
using kernels::kSimtF64BudgetAbs;
using kernels::kSimtF64BudgetRel;

absl::Status Run(const GemmArgs& g) {
  const cuda::StreamResources& resources = cuda::Resources(g.stream);
  SimtArgs args;
  args.dtype = g.problem.dtype;
  args.a = g.a;
  args.b = g.b;
  args.c = g.c;
  args.m = g.problem.m;
  args.n = g.problem.n;
  args.k = g.problem.k;
  return cuda::CudaStatus(LaunchSimt(args, resources.stream), "LaunchSimt", __FILE__, __LINE__);
}

}  // namespace

CandidateSpec MakeSimtCandidate() {
  CandidateSpec spec;
  spec.name = "simt";
  spec.version = 1;
  spec.tier = 1;
  spec.description = "generic 64x64 shared-memory tiled FMA kernel, any arch the build targets";
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
    CandidateMember member;
    member.contract.dtype = dtype;
    member.contract.entry =
        "arbiter::kernels::LaunchSimt(" + std::string(DTypeName(dtype)) + ")";
    const bool f64 = dtype == DType::kF64;
    member.contract.accuracy = {f64 ? kSimtF64BudgetAbs : kSimtBudgetAbs,
                                f64 ? kSimtF64BudgetRel : kSimtBudgetRel};
    member.contract.determinism = Determinism::kBatchInvariant;
    member.contract.arch = "sm_80+";
    member.run = Run;
    spec.members.push_back(std::move(member));
  }
  return spec;
}

}  // namespace arbiter
