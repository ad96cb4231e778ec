#include "kernels/mma_warp/mma_warp_candidate.h"

#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels/mma_warp/mma_warp.h"

namespace arbiter {
namespace {

using kernels::LaunchMmaWarp;
using kernels::MmaWarpArgs;
using kernels::kMmaWarpBudgetAbs;
using kernels::kMmaWarpBudgetRel;

absl::Status Run(const GemmArgs& g) {
  const cuda::StreamResources& resources = cuda::Resources(g.stream);
  MmaWarpArgs args;
  args.dtype = g.problem.dtype;
  args.a = g.a;
  args.b = g.b;
  args.c = g.c;
  args.m = g.problem.m;
  args.n = g.problem.n;
  args.k = g.problem.k;
  return cuda::CudaStatus(LaunchMmaWarp(args, resources.stream), "LaunchMmaWarp", __FILE__, __LINE__);
}

}  // namespace

CandidateSpec MakeMmaWarpCandidate() {
  CandidateSpec spec;
  spec.name = "mma_warp";
  spec.version = 1;
  spec.tier = 1;
  spec.description = "one warp per 16x8 tile, mma.sync m16n8k16, K serial in registers (sm_80+)";
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    CandidateMember member;
    member.contract.dtype = dtype;
    member.contract.entry =
        "arbiter::kernels::LaunchMmaWarp(" + std::string(DTypeName(dtype)) + ")";
    member.contract.accuracy = {kMmaWarpBudgetAbs, kMmaWarpBudgetRel};
    member.contract.determinism = Determinism::kBatchInvariant;
    member.contract.arch = "sm_80+";
    member.run = Run;
    spec.members.push_back(std::move(member));
  }
  return spec;
}

}  // namespace arbiter
