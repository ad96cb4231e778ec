// The contracts the hand-written CUDA families register: valid for the
// registry, with the names, determinism, architecture and coverage the kernels
// are written to honour (their device tests check the claims themselves).
// No device needed.

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/candidate.h"
#include "engine/contract.h"
#include "kernels/gemv/gemv_candidate.h"
#include "kernels/mma_tiled/mma_tiled_candidate.h"
#include "kernels/mma_warp/mma_warp_candidate.h"
#include "kernels/simt/simt_candidate.h"
#include "kernels/skinny/skinny_candidate.h"
#include "kernels/splitk/splitk_candidate.h"
#include "kernels/splitk_tiny/splitk_tiny_candidate.h"
#include "kernels/wgmma_ragged/wgmma_ragged_candidate.h"

namespace arbiter {
namespace {

std::vector<CandidateSpec> All() {
  std::vector<CandidateSpec> specs = {kernels::MakeMmaWarpCandidate(),
                                      kernels::MakeMmaTiledCandidate(), kernels::MakeGemvCandidate(),
                                      kernels::MakeSimtCandidate(), kernels::MakeSkinnyCandidate(),
                                      kernels::MakeSkinnyWideCandidate(),
                                      kernels::MakeSkinnyRaggedCandidate(),
                                      kernels::MakeSplitKTinyCandidate(),
                                      kernels::MakeWgmmaRaggedCandidate()};
  for (CandidateSpec& s : kernels::MakeSplitkCandidate()) specs.push_back(std::move(s));
  return specs;
}

const CandidateSpec& Named(const std::vector<CandidateSpec>& specs, const std::string& name) {
  for (const CandidateSpec& s : specs) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no candidate " << name;
  static const CandidateSpec empty;
  return empty;
}

TEST(CudaFamilyContracts, EveryCandidateValidates) {
  for (const CandidateSpec& spec : All()) {
    EXPECT_TRUE(ValidateCandidate(spec).ok()) << spec << ": " << ValidateCandidate(spec);
    for (const CandidateMember& m : spec.members) EXPECT_TRUE(m.run) << spec << " " << m.contract;
  }
}

TEST(CudaFamilyContracts, DeterminismClaimsMatchTheKernels) {
  const std::vector<CandidateSpec> specs = All();
  const std::pair<const char*, Determinism> expected[] = {
      {"mma_warp", Determinism::kBatchInvariant}, {"mma_tiled", Determinism::kBatchInvariant},
      {"gemv", Determinism::kBatchInvariant},     {"simt", Determinism::kBatchInvariant},
      {"splitk", Determinism::kRunToRun},         {"skinny", Determinism::kBatchInvariant},
      {"skinny_wide", Determinism::kBatchInvariant}, {"splitk_atomic", Determinism::kNondeterministic},
      {"splitk_tiny", Determinism::kRunToRun}, {"wgmma_ragged", Determinism::kBatchInvariant},
      {"skinny_ragged", Determinism::kBatchInvariant}};
  for (const auto& [name, determinism] : expected) {
    for (const CandidateMember& m : Named(specs, name).members) {
      EXPECT_EQ(m.contract.determinism, determinism) << name << " " << m.contract;
    }
  }
}

TEST(CudaFamilyContracts, TensorCoreFamiliesTakeHalfTypesOnly) {
  const std::vector<CandidateSpec> specs = All();
  for (const char* name :
       {"mma_warp", "mma_tiled", "splitk", "splitk_atomic", "splitk_tiny", "gemv", "skinny",
        "skinny_wide", "skinny_ragged", "wgmma_ragged"}) {
    const CandidateSpec& spec = Named(specs, name);
    EXPECT_NE(spec.Member(DType::kF16), nullptr) << name;
    EXPECT_NE(spec.Member(DType::kBF16), nullptr) << name;
    EXPECT_EQ(spec.Member(DType::kF32), nullptr) << name;
  }
  const CandidateSpec& simt = Named(specs, "simt");
  for (DType d : kAllDTypes) EXPECT_NE(simt.Member(d), nullptr) << "simt " << d;
}

// skinny is raced at up to 8 rows of a weight whose N is even (where the H200
// bench had it competitive with cuBLAS), any K, on sm_90+ (its K splits meet in
// a thread-block cluster); skinny_wide at 9-16 rows of N % 8 == 0.
TEST(CudaFamilyContracts, SkinnyCoversAtMost8RowsOfEvenNAndAnyKOnSm90) {
  const std::vector<CandidateSpec> specs = All();
  const CandidateSpec& skinny = Named(specs, "skinny");
  for (const CandidateMember& m : skinny.members) {
    EXPECT_EQ(m.contract.arch, "sm_90+");
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 8, 14336, 4095}).empty());
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 1, 256000, 3584}).empty());
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 1, 30522, 768}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 9, 4096, 4096}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 1, 30521, 768}).empty());
  }
}

TEST(CudaFamilyContracts, SkinnyWideCovers9To16RowsOfAlignedNOnSm90) {
  const std::vector<CandidateSpec> specs = All();
  const CandidateSpec& wide = Named(specs, "skinny_wide");
  for (const CandidateMember& m : wide.members) {
    EXPECT_EQ(m.contract.arch, "sm_90+");
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 16, 256000, 3584}).empty());
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 9, 28672, 4095}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 8, 28672, 4096}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 17, 4096, 4096}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 16, 30522, 768}).empty());
  }
}

// skinny_ragged covers 1-16 rows, any N and K, on sm_90+; its launcher
// declines N % 8 == 0 and a misaligned B, which no coverage field can say
// (tests/kernels/skinny checks those refusals).
TEST(CudaFamilyContracts, SkinnyRaggedCoversAtMost16RowsOnSm90) {
  const std::vector<CandidateSpec> specs = All();
  const CandidateSpec& ragged = Named(specs, "skinny_ragged");
  for (const CandidateMember& m : ragged.members) {
    EXPECT_EQ(m.contract.arch, "sm_90+");
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 8, 32001, 4096}).empty());
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 16, 50257, 768}).empty());
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 1, 30522, 767}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 17, 32001, 4096}).empty());
  }
}

// splitk_tiny is raced at M, N <= 16 (any N) against K >= 32768 with K % 8 ==
// 0 (where the H200 bench had it at or near cuBLAS), on sm_90+ (its K slices
// meet in thread-block clusters).
TEST(CudaFamilyContracts, SplitKTinyCoversTinyCAgainstLongAlignedK) {
  const std::vector<CandidateSpec> specs = All();
  const CandidateSpec& tiny = Named(specs, "splitk_tiny");
  for (const CandidateMember& m : tiny.members) {
    EXPECT_EQ(m.contract.arch, "sm_90+");
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 16, 16, 65536}).empty());
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 13, 5, 32776}).empty());
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 1, 1, 1 << 20}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 17, 16, 65536}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 16, 17, 65536}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 16, 16, 65540}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 16, 16, 16384}).empty());
  }
}

// wgmma_ragged covers any M and N against K % 8 == 0 on sm_90a only (wgmma);
// its launcher declines N % 8 == 0, which no coverage field can say
// (tests/kernels/wgmma_ragged checks that refusal).
TEST(CudaFamilyContracts, WgmmaRaggedCoversAlignedKOnSm90a) {
  const std::vector<CandidateSpec> specs = All();
  const CandidateSpec& ragged = Named(specs, "wgmma_ragged");
  for (const CandidateMember& m : ragged.members) {
    EXPECT_EQ(m.contract.arch, "sm_90a");
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 512, 30522, 768}).empty());
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 1, 32001, 4096}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 512, 30522, 766}).empty());
  }
}

TEST(CudaFamilyContracts, GemvCoversAtMostSixteenRows) {
  const std::vector<CandidateSpec> specs = All();
  const CandidateSpec& gemv = Named(specs, "gemv");
  for (const CandidateMember& m : gemv.members) {
    EXPECT_TRUE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 16, 4096, 4096}).empty());
    EXPECT_FALSE(CoverageGap(m.contract.shape, Problem{m.contract.dtype, 17, 4096, 4096}).empty());
  }
}

}  // namespace
}  // namespace arbiter
