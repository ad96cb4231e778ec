// Registration of a hand-written CUDA kernel family: MakeFamily turns what a
// family declares (name, tier, members with their budgets, determinism, arch,
// coverage) and its Launcher into the engine's CandidateSpec, with one member
// per dtype whose KernelFn runs the launcher on the CudaBackend stream in
// GemmArgs: the stream's device gives sm_count, the stream's scratch the
// workspace, and a launch error comes back as a Status naming the launcher.
// The kernels, their launch geometry and why each is (non)deterministic live
// in the family's own .cu file.
#pragma once

#include <string>
#include <vector>

#include "engine/candidate.h"
#include "engine/contract.h"
#include "kernels/common/launch_args.h"

namespace arbiter::kernels {

// One dtype the family takes, with its accuracy budget (engine/contract.h).
struct FamilyMember {
  DType dtype = DType::kF16;
  AccuracyBudget accuracy = {};
};

// f16 and bf16, both with `budget`: what the tensor-core families take.
std::vector<FamilyMember> HalfTypes(AccuracyBudget budget);

// What a family declares; MakeFamily builds the candidate from it.
struct Family {
  std::string name = "";  // the candidate's stable name
  int version = 1;        // bump when the kernel's code changes
  int tier = 1;
  std::string arch = "sm_80+";
  ShapeCoverage shape = {};  // default: every M, N, K
  OutputTile tile = {};      // the tile of C a CTA computes; default: unknown (picked per shape)
  Determinism determinism = Determinism::kNondeterministic;
  std::vector<FamilyMember> members = {};
  Launcher launcher = {};
  std::string description = "";  // one line for operators
};

// The candidate: member contracts name "arbiter::kernels::<launcher>(<dtype>)"
// as their entry. Each KernelFn needs a Stream created by CudaBackend
// (backends/cuda/cuda_resources.h).
CandidateSpec MakeFamily(const Family& family);

}  // namespace arbiter::kernels
