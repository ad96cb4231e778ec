#include "kernels/openblas/openblas.h"

#include <cblas.h>

#include <climits>
#include <string>

namespace arbiter {
namespace {

constexpr int kVersion = 1;

absl::Status CheckArgs(const GemmArgs& args, DType dtype) {
  const Problem& p = args.problem;
  if (p.dtype != dtype) {
    return absl::InvalidArgumentError("openblas: member " + std::string(DTypeName(dtype)) +
                                      " launched for " + p.ToString());
  }
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) {
    return absl::InvalidArgumentError("openblas: null operand for " + p.ToString());
  }
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX) {
    return absl::InvalidArgumentError("openblas: dims must be in [1, 2^31) for 32-bit blasint, got " +
                                      p.ToString());
  }
  return absl::OkStatus();
}

absl::Status RunSgemm(const GemmArgs& args) {
  RETURN_IF_ERROR(CheckArgs(args, DType::kF32));
  const Problem& p = args.problem;
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
              static_cast<const float*>(args.a), k, static_cast<const float*>(args.b), n, 0.0f,
              static_cast<float*>(args.c), n);
  return absl::OkStatus();
}

absl::Status RunDgemm(const GemmArgs& args) {
  RETURN_IF_ERROR(CheckArgs(args, DType::kF64));
  const Problem& p = args.problem;
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0,
              static_cast<const double*>(args.a), k, static_cast<const double*>(args.b), n, 0.0,
              static_cast<double*>(args.c), n);
  return absl::OkStatus();
}

CandidateMember Member(DType dtype, const char* entry, AccuracyBudget accuracy, KernelFn run) {
  CandidateMember member;
  member.contract.dtype = dtype;
  member.contract.entry = entry;
  member.contract.accuracy = accuracy;
  member.contract.determinism = Determinism::kRunToRun;
  member.contract.arch = "cpu";
  // blasint is 32-bit in Debian's build (no OPENBLAS_USE64BITINT).
  member.contract.shape.max_m = INT_MAX;
  member.contract.shape.max_n = INT_MAX;
  member.contract.shape.max_k = INT_MAX;
  member.run = std::move(run);
  return member;
}

}  // namespace

CandidateSpec MakeOpenBlasCandidate() {
  CandidateSpec spec;
  spec.name = "openblas";
  spec.version = kVersion;
  spec.tier = 3;
  spec.description = "OpenBLAS cblas_sgemm/cblas_dgemm (vendor delegate)";
  // Budgets. Measured at 64x64xK, K = 16..65536, N(0,1)*0.5 operands, 3 seeds
  // (OpenBLAS 0.3.21, Zen core kernels): max_rel_error/sqrt(K) raw, then net of
  // the u(dtype)*|ref| term the tolerance adds for rounding C. Its K blocks are
  // summed into C, so the figures fall with K past 256. Skipping the last 32 K
  // values at 8x8x65536 is caught while rel < 6.6e-5.
  // f32: raw 3.4e-8, net 3.2e-8 (K=256); 2.9e-9 at K=65536 -> rel 2e-7 (6x).
  spec.members.push_back(
      Member(DType::kF32, "cblas_sgemm", {.abs = 1e-6, .rel = 2e-7}, RunSgemm));
  // f64: raw 7.9e-17, net 7.9e-17 (K=16384) -> rel 4e-16 (5x).
  spec.members.push_back(
      Member(DType::kF64, "cblas_dgemm", {.abs = 1e-14, .rel = 4e-16}, RunDgemm));
  return spec;
}

}  // namespace arbiter
