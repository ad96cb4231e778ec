#include "kernels/gemv/gemv_candidate.h"

#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels/gemv/gemv.h"

namespace arbiter {
namespace {

using kernels::LaunchGemv;
using kernels::GemvArgs;
using kernels::GemvWorkspaceBytes;
using kernels::kGemvMaxM;
using kernels::kGemvBudgetAbs;
using kernels::kGemvBudgetRel;

absl::Status Run(const GemmArgs& g) {
  const cuda::StreamResources& resources = cuda::Resources(g.stream);
  GemvArgs args;
  args.dtype = g.problem.dtype;
  args.a = g.a;
  args.b = g.b;
  args.c = g.c;
  args.m = g.problem.m;
  args.n = g.problem.n;
  args.k = g.problem.k;
  args.sm_count = resources.props->multiProcessorCount;
  args.workspace_bytes = GemvWorkspaceBytes(args);  // K-split partials, when split
  if (args.workspace_bytes > 0) {
    ASSIGN_OR_RETURN(args.workspace, cuda::Scratch(g.stream, args.workspace_bytes));
  }
  return cuda::CudaStatus(LaunchGemv(args, resources.stream), "LaunchGemv", __FILE__, __LINE__);
}

}  // namespace

CandidateSpec MakeGemvCandidate() {
  CandidateSpec spec;
  spec.name = "gemv";
  spec.version = 1;
  spec.tier = 2;
  spec.description = "M <= 16: streams B once with 16-byte loads, f32 FMA";
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    CandidateMember member;
    member.contract.dtype = dtype;
    member.contract.entry =
        "arbiter::kernels::LaunchGemv(" + std::string(DTypeName(dtype)) + ")";
    member.contract.accuracy = {kGemvBudgetAbs, kGemvBudgetRel};
    member.contract.determinism = Determinism::kBatchInvariant;
    member.contract.arch = "sm_80+";
    member.contract.shape.max_m = kGemvMaxM;
    member.run = Run;
    spec.members.push_back(std::move(member));
  }
  return spec;
}

}  // namespace arbiter
