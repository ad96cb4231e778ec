#include "kernels/common/family.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"

namespace arbiter::kernels {
namespace {

absl::Status Run(const Launcher& launcher, const GemmArgs& g) {
  LaunchArgs args;
  args.dtype = g.problem.dtype;
  args.a = g.a;
  args.b = g.b;
  args.c = g.c;
  args.m = g.problem.m;
  args.n = g.problem.n;
  args.k = g.problem.k;
  if (launcher.unsupported != nullptr) {
    if (const char* why = launcher.unsupported(args)) {
      return absl::UnimplementedError(
          absl::StrCat(launcher.name, " declines ", g.problem.ToString(), ": ", why));
    }
  }
  const cuda::StreamResources& resources = cuda::Resources(g.stream);
  args.sm_count = resources.props->multiProcessorCount;
  if (launcher.workspace_bytes != nullptr) {
    args.workspace_bytes = launcher.workspace_bytes(args);
    if (args.workspace_bytes > 0) {
      ASSIGN_OR_RETURN(args.workspace, cuda::Scratch(g.stream, args.workspace_bytes));
    }
  }
  return cuda::CudaStatus(launcher.launch(args, resources.stream), launcher.name, __FILE__,
                          __LINE__);
}

}  // namespace

std::vector<FamilyMember> HalfTypes(AccuracyBudget budget) {
  return {{DType::kF16, budget}, {DType::kBF16, budget}};
}

CandidateSpec MakeFamily(const Family& family) {
  CandidateSpec spec;
  spec.name = family.name;
  spec.version = family.version;
  spec.tier = family.tier;
  spec.description = family.description;
  for (const FamilyMember& m : family.members) {
    CandidateMember member;
    member.contract.dtype = m.dtype;
    member.contract.entry =
        absl::StrCat("arbiter::kernels::", family.launcher.name, "(", DTypeName(m.dtype), ")");
    member.contract.accuracy = m.accuracy;
    member.contract.determinism = family.determinism;
    member.contract.arch = family.arch;
    member.contract.shape = family.shape;
    member.contract.tile = family.tile;
    member.run = [launcher = family.launcher](const GemmArgs& g) { return Run(launcher, g); };
    spec.members.push_back(std::move(member));
  }
  return spec;
}

}  // namespace arbiter::kernels
