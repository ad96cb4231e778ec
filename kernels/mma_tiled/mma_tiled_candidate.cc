#include "kernels/mma_tiled/mma_tiled_candidate.h"

#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels/mma_tiled/mma_tiled.h"

namespace arbiter {
namespace {

using kernels::LaunchMmaTiled;
using kernels::MmaTiledArgs;
using kernels::MmaTiledWorkspaceBytes;
using kernels::kMmaTiledBudgetAbs;
using kernels::kMmaTiledBudgetRel;

absl::Status Run(const GemmArgs& g) {
  const cuda::StreamResources& resources = cuda::Resources(g.stream);
  MmaTiledArgs args;
  args.dtype = g.problem.dtype;
  args.a = g.a;
  args.b = g.b;
  args.c = g.c;
  args.m = g.problem.m;
  args.n = g.problem.n;
  args.k = g.problem.k;
  args.sm_count = resources.props->multiProcessorCount;
  args.workspace_bytes = MmaTiledWorkspaceBytes(args);  // padded operands, when needed
  if (args.workspace_bytes > 0) {
    ASSIGN_OR_RETURN(args.workspace, cuda::Scratch(g.stream, args.workspace_bytes));
  }
  return cuda::CudaStatus(LaunchMmaTiled(args, resources.stream), "LaunchMmaTiled", __FILE__, __LINE__);
}

}  // namespace

CandidateSpec MakeMmaTiledCandidate() {
  CandidateSpec spec;
  spec.name = "mma_tiled";
  spec.version = 1;
  spec.tier = 2;
  spec.description = "CTA-tiled mma.sync, 4-stage cp.async pipeline, ldmatrix (sm_80+)";
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    CandidateMember member;
    member.contract.dtype = dtype;
    member.contract.entry =
        "arbiter::kernels::LaunchMmaTiled(" + std::string(DTypeName(dtype)) + ")";
    member.contract.accuracy = {kMmaTiledBudgetAbs, kMmaTiledBudgetRel};
    member.contract.determinism = Determinism::kBatchInvariant;
    member.contract.arch = "sm_80+";
    member.run = Run;
    spec.members.push_back(std::move(member));
  }
  return spec;
}

}  // namespace arbiter
