#include "tests/kernels/registry/planted_candidates.h"

#include <string>
#include <vector>

namespace arbiter::testing {
namespace {

// Rows [0, rows) of C = A[:, 0:k_used] * B[0:k_used, :], f64 accumulation.
void TripleLoop(const GemmArgs& args, int64_t rows, int64_t k_used) {
  const Problem& p = args.problem;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < k_used; ++k) {
        sum += LoadAsDouble(p.dtype, args.a, static_cast<size_t>(i * p.k + k)) *
               LoadAsDouble(p.dtype, args.b, static_cast<size_t>(k * p.n + j));
      }
      StoreFromDouble(p.dtype, args.c, static_cast<size_t>(i * p.n + j), sum);
    }
  }
}

// Copies of cpu_blocked's budgets: "normal" claims, so the planted faults (not
// loose budgets) decide the outcome.
AccuracyBudget NormalBudget(DType dtype) {
  switch (dtype) {
    case DType::kF32: return {.abs = 1e-6, .rel = 2e-7};
    case DType::kF64: return {.abs = 1e-14, .rel = 4e-16};
    case DType::kF16: return {.abs = 1e-5, .rel = 2e-7};
    case DType::kBF16: return {.abs = 1e-5, .rel = 2e-7};
  }
  return {};
}

CandidateSpec Planted(const std::string& name, const std::string& description,
                      const KernelFn& run) {
  CandidateSpec spec;
  spec.name = name;
  spec.version = 1;
  spec.tier = 2;
  spec.description = description;
  for (DType dtype : kAllDTypes) {
    CandidateMember member;
    member.contract.dtype = dtype;
    member.contract.entry = name + "<" + DTypeName(dtype) + ">";
    member.contract.accuracy = NormalBudget(dtype);
    member.contract.determinism = Determinism::kBatchInvariant;
    member.contract.arch = "cpu";
    member.run = run;
    spec.members.push_back(std::move(member));
  }
  return spec;
}

}  // namespace

int64_t PlantedSkippedK(int64_t k) { return k > 32 ? 32 : 1; }

CandidateSpec MakePlantedSkipKCandidate() {
  return Planted("planted_skip_k", "planted fault: drops the last 32 (or 1) values of K",
                 [](const GemmArgs& args) {
                   TripleLoop(args, args.problem.m,
                              args.problem.k - PlantedSkippedK(args.problem.k));
                   return absl::OkStatus();
                 });
}

CandidateSpec MakePlantedPartialCCandidate() {
  return Planted("planted_partial_c", "planted fault: writes only the first half of C's rows",
                 [](const GemmArgs& args) {
                   TripleLoop(args, args.problem.m / 2, args.problem.k);
                   return absl::OkStatus();
                 });
}

CandidateSpec MakePlantedGatedCandidate(std::function<void()> before) {
  return Planted("planted_gated", "correct, but waits for its test before each run",
                 [before = std::move(before)](const GemmArgs& args) {
                   before();
                   TripleLoop(args, args.problem.m, args.problem.k);
                   return absl::OkStatus();
                 });
}

}  // namespace arbiter::testing
