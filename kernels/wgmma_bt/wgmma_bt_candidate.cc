#include "kernels/wgmma_bt/wgmma_bt_candidate.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_resources.h"
#include "kernels/wgmma_bt/wgmma_bt.h"

namespace arbiter::kernels {
namespace {

constexpr char kName[] = "wgmma_bt";

absl::Status Run(DType dtype, const GemmArgs& g) {
  const Problem& p = g.problem;
  if (p.dtype != dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": member ", DTypeName(dtype), " launched for ", p.ToString()));
  }
  const cuda::StreamResources& res = cuda::Resources(g.stream);
  LaunchArgs args;
  args.dtype = dtype;
  args.a = g.a;
  args.b = g.b;
  args.c = g.c;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.sm_count = res.props->multiProcessorCount;
  if (const char* why = WgmmaBtUnsupportedReason(args)) {
    return absl::UnimplementedError(absl::StrCat(kName, " declines ", p.ToString(), ": ", why));
  }
  const std::string call = absl::StrCat("LaunchWgmmaBt(", p.ToString(), ")");
  return cuda::CudaStatus(LaunchWgmmaBt(args, res.stream), call.c_str(), __FILE__, __LINE__);
}

CandidateMember Member(DType dtype) {
  CandidateMember member;
  member.contract.dtype = dtype;
  member.contract.entry = absl::StrCat("arbiter::kernels::LaunchWgmmaBt(", DTypeName(dtype), ")");
  member.contract.accuracy = {kWgmmaBtBudgetAbs, kWgmmaBtBudgetRel};
  // Fixed-order K walk and rank-order split sums: bitwise run to run. The
  // token tile and split count follow M, so not batch invariant.
  member.contract.determinism = Determinism::kRunToRun;
  // wgmma exists only in sm_90a code (no PTX to JIT elsewhere).
  member.contract.arch = "sm_90a";
  // TMA: 16-byte row strides. Raced where the few-token orientation pays
  // (wgmma_bt.h); the launcher itself takes any M.
  member.contract.shape = {.min_m = kWgmmaBtRacedMinM, .max_m = kWgmmaBtRacedMaxM, .align_n = 8,
                           .align_k = 8};
  // The tile is left unknown: the token tile (32-256 rows of C) and the strip
  // width (64 or 128 columns) follow M (MakeWgmmaBtPlan), so no one tile
  // describes the member.
  member.run = [dtype](const GemmArgs& g) { return Run(dtype, g); };
  return member;
}

}  // namespace

CandidateSpec MakeWgmmaBtCandidate() {
  CandidateSpec spec;
  spec.name = kName;
  spec.version = 1;
  spec.tier = 3;
  spec.description =
      "17-256 rows: C^T = B^T A^T with wgmma (weight as the 64-row operand, tokens as N), "
      "B streamed once by TMA, K split in clusters";
  spec.members.push_back(Member(DType::kF16));
  spec.members.push_back(Member(DType::kBF16));
  return spec;
}

}  // namespace arbiter::kernels
