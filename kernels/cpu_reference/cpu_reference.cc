#include "kernels/cpu_reference/cpu_reference.h"

#include <string>
#include <vector>

#include "engine/load_as.h"

namespace arbiter {
namespace {

constexpr int kVersion = 1;

// Loop order i, k, j with a row of f64 accumulators: still one product and one
// add per (i, j, k) with k ascending for every element, but B is read along its
// rows, which keeps the naive loop usable at the shapes the tests run.
template <DType D>
absl::Status RunReference(const GemmArgs& args) {
  const Problem& p = args.problem;
  if (p.dtype != D) {
    return absl::InvalidArgumentError("cpu_reference: member " + std::string(DTypeName(D)) +
                                      " launched for " + p.ToString());
  }
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) {
    return absl::InvalidArgumentError("cpu_reference: null operand for " + p.ToString());
  }
  std::vector<double> row(static_cast<size_t>(p.n));
  for (int64_t i = 0; i < p.m; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < p.k; ++k) {
      const double a_ik = LoadAs<D>(args.a, static_cast<size_t>(i * p.k + k));
      for (int64_t j = 0; j < p.n; ++j) {
        row[j] += a_ik * LoadAs<D>(args.b, static_cast<size_t>(k * p.n + j));
      }
    }
    for (int64_t j = 0; j < p.n; ++j) {
      StoreFromDouble(D, args.c, static_cast<size_t>(i * p.n + j), row[j]);
    }
  }
  return absl::OkStatus();
}

CandidateMember Member(DType dtype, AccuracyBudget accuracy, KernelFn run) {
  CandidateMember member;
  member.contract.dtype = dtype;
  member.contract.entry = "cpu_reference<" + std::string(DTypeName(dtype)) + ">";
  member.contract.accuracy = accuracy;
  // One thread, one fixed loop order: no element depends on M or on another run.
  member.contract.determinism = Determinism::kBatchInvariant;
  member.contract.arch = "cpu";
  member.run = std::move(run);
  return member;
}

}  // namespace

CandidateSpec MakeCpuReferenceCandidate() {
  CandidateSpec spec;
  spec.name = "cpu_reference";
  spec.version = kVersion;
  spec.tier = 1;
  spec.description = "naive loop, f64 accumulation, single thread";
  // Budgets. Measured at 64x64xK, K = 16..65536, N(0,1)*0.5 operands, 3 seeds:
  // max_rel_error/sqrt(K) raw, then net of the u(dtype)*|ref| term the tolerance
  // adds for rounding C. The only error beyond that rounding is the f64 sum
  // (summed in the oracle's order: 0 here) and, for f16/bf16, StoreFromDouble
  // rounding through f32 first (up to u(f32)*|ref| = 6e-8 max|ref| more).
  // Skipping the last 32 K values at 8x8x65536 is caught while rel < 6.6e-5.
  // f32: raw 1.2e-8 (K=16), net 0. rel 1e-9 covers any f64 sum order.
  spec.members.push_back(
      Member(DType::kF32, {.abs = 1e-6, .rel = 1e-9}, RunReference<DType::kF32>));
  // f64: raw 0, net 0 (same order as the oracle); 4e-16 allows another order.
  spec.members.push_back(
      Member(DType::kF64, {.abs = 1e-14, .rel = 4e-16}, RunReference<DType::kF64>));
  // f16: raw 8.8e-5 (K=16, all storage rounding), net 0; 2.5e-7 is 4x the
  // double-rounding bound at K=1. abs covers f16 subnormal spacing (6e-8).
  spec.members.push_back(
      Member(DType::kF16, {.abs = 1e-5, .rel = 2.5e-7}, RunReference<DType::kF16>));
  // bf16: raw 5.8e-4 (K=16, all storage rounding), net 0; as f16.
  spec.members.push_back(
      Member(DType::kBF16, {.abs = 1e-5, .rel = 2.5e-7}, RunReference<DType::kBF16>));
  return spec;
}

}  // namespace arbiter
