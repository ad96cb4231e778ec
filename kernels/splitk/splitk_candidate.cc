#include "kernels/splitk/splitk_candidate.h"

#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels/splitk/splitk.h"

namespace arbiter {
namespace {

using kernels::LaunchSplitK;
using kernels::SplitKArgs;
using kernels::SplitKWorkspaceBytes;
using kernels::kSplitKBudgetAbs;
using kernels::kSplitKBudgetRel;

absl::Status Run(const GemmArgs& g, bool atomic) {
  const cuda::StreamResources& resources = cuda::Resources(g.stream);
  SplitKArgs args;
  args.dtype = g.problem.dtype;
  args.a = g.a;
  args.b = g.b;
  args.c = g.c;
  args.m = g.problem.m;
  args.n = g.problem.n;
  args.k = g.problem.k;
  args.atomic = atomic;
  args.sm_count = resources.props->multiProcessorCount;
  args.workspace_bytes = SplitKWorkspaceBytes(args);
  ASSIGN_OR_RETURN(args.workspace, cuda::Scratch(g.stream, args.workspace_bytes));
  return cuda::CudaStatus(LaunchSplitK(args, resources.stream), "LaunchSplitK", __FILE__, __LINE__);
}

CandidateSpec MakeVariant(bool atomic) {
  CandidateSpec spec;
  spec.name = atomic ? "splitk_atomic" : "splitk";
  spec.version = 1;
  spec.tier = 2;
  spec.description = atomic ? "K split across CTAs, f32 atomicAdd into scratch (nondeterministic)"
                            : "K split across CTAs, partials reduced in split order (sm_80+)";
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    CandidateMember member;
    member.contract.dtype = dtype;
    member.contract.entry = std::string("arbiter::kernels::LaunchSplitK(") +
                            std::string(DTypeName(dtype)) + (atomic ? ", atomic)" : ")");
    member.contract.accuracy = {kSplitKBudgetAbs, kSplitKBudgetRel};
    member.contract.determinism =
        atomic ? Determinism::kNondeterministic : Determinism::kRunToRun;
    member.contract.arch = "sm_80+";
    member.run = [atomic](const GemmArgs& g) { return Run(g, atomic); };
    spec.members.push_back(std::move(member));
  }
  return spec;
}

}  // namespace

std::vector<CandidateSpec> MakeSplitkCandidate() { return {MakeVariant(false), MakeVariant(true)}; }

}  // namespace arbiter
