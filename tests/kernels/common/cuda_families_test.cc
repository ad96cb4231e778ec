// Device tests of the hand-written CUDA kernel families (mma_warp, mma_tiled,
// splitk, splitk_atomic, gemv, simt), driven through their launchers: every
// family against an f64 CPU reference on NaN-poisoned C at ragged and
// non-square shapes, with the engine's oracle and each family's own budget; the
// launch geometry on M != N; and the determinism each contract claims.
// Labelled gpu; every test skips itself, saying why, where no sm_80+ GPU is.

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "engine/contract.h"
#include "engine/dtype.h"
#include "engine/problem.h"
#include "kernels/gemv/gemv.h"
#include "kernels/mma_tiled/mma_tiled.h"
#include "kernels/mma_warp/mma_warp.h"
#include "kernels/simt/simt.h"
#include "kernels/splitk/splitk.h"
#include "tests/kernels/common/device_gemm.h"

namespace arbiter::kernels {
namespace {

using testing::DeviceGemm;

struct Shape {
  int64_t m, n, k;
};

// Scratch, grown on demand and kept for the process.
void* Workspace(size_t bytes) {
  static void* ptr = nullptr;
  static size_t size = 0;
  if (bytes == 0) return nullptr;
  if (bytes > size) {
    CUDA_OK(cudaFree(ptr));
    CUDA_OK(cudaMalloc(&ptr, bytes));
    size = bytes;
  }
  return ptr;
}

// Launches `launcher` on `stream` for g's problem with A read from `a` (g.a()
// or g.misaligned_a()), planning for `sm_count` multiprocessors where the
// family looks at it, with the scratch the family asks for.
cudaError_t Launch(const Launcher& launcher, const DeviceGemm& g, const void* a, int sm_count,
                   cudaStream_t stream) {
  LaunchArgs args = g.Args(sm_count);
  args.a = a;
  if (launcher.workspace_bytes != nullptr) {
    args.workspace_bytes = launcher.workspace_bytes(args);
    args.workspace = Workspace(args.workspace_bytes);
  }
  return launcher.launch(args, stream);
}

struct Family {
  std::string name;
  std::vector<DType> dtypes;
  int64_t max_m = INT64_MAX;
  Determinism determinism = Determinism::kNondeterministic;
  bool alignment_paths = false;  // takes another path (padding, element loads) when unaligned
  std::function<AccuracyBudget(DType)> budget;
  Launcher launcher;
};

void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

std::vector<Family> AllFamilies() {
  const std::vector<DType> half_types = {DType::kF16, DType::kBF16};
  std::vector<Family> families;
  families.push_back({"mma_warp", half_types, INT64_MAX, Determinism::kBatchInvariant, false,
                      [](DType) { return AccuracyBudget{kMmaWarpBudgetAbs, kMmaWarpBudgetRel}; },
                      kMmaWarp});
  families.push_back({"mma_tiled", half_types, INT64_MAX, Determinism::kBatchInvariant, true,
                      [](DType) { return AccuracyBudget{kMmaTiledBudgetAbs, kMmaTiledBudgetRel}; },
                      kMmaTiled});
  families.push_back({"splitk", half_types, INT64_MAX, Determinism::kRunToRun, true,
                      [](DType) { return AccuracyBudget{kSplitKBudgetAbs, kSplitKBudgetRel}; },
                      kSplitK});
  families.push_back({"splitk_atomic", half_types, INT64_MAX, Determinism::kNondeterministic,
                      true,
                      [](DType) { return AccuracyBudget{kSplitKBudgetAbs, kSplitKBudgetRel}; },
                      kSplitKAtomic});
  families.push_back({"gemv", half_types, kGemvMaxM, Determinism::kBatchInvariant, true,
                      [](DType) { return AccuracyBudget{kGemvBudgetAbs, kGemvBudgetRel}; },
                      kGemv});
  families.push_back(
      {"simt", {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}, INT64_MAX,
       Determinism::kBatchInvariant, false,
       [](DType d) {
         return d == DType::kF64 ? AccuracyBudget{kSimtF64BudgetAbs, kSimtF64BudgetRel}
                                 : AccuracyBudget{kSimtBudgetAbs, kSimtBudgetRel};
       },
       kSimt});
  return families;
}

// Ragged (no dim a multiple of 8 or of a tile), aligned, skinny, and K up to 65536.
std::vector<Shape> RaggedShapes(const Family& f) {
  if (f.max_m <= 16) {
    return {{1, 1, 1},      {1, 4096, 4096}, {2, 33, 45},   {3, 9, 127},    {5, 131, 257},
            {8, 264, 1024}, {9, 40, 4100},   {13, 333, 2049}, {16, 256, 512}, {16, 16, 65536}};
  }
  return {{1, 1, 1},       {1, 4096, 4096},  {17, 33, 45},    {31, 9, 127},
          {129, 131, 257}, {64, 72, 1024},   {128, 256, 512}, {33, 40, 4100},
          {300, 260, 1000}, {256, 264, 1024}, {16, 16, 65536}};
}

class CudaFamilyTest : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    ARBITER_SKIP_WITHOUT_GPU(80);
    CUDA_OK(cudaStreamCreate(&stream_));
    sm_count_ = testing::DeviceSmCount();
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Poisons C, launches, and checks the launch returned cudaSuccess.
  ::testing::AssertionResult Run(DeviceGemm& g, const void* a = nullptr, int sm_count = 0) {
    g.PoisonC();
    const cudaError_t err = Launch(GetParam().launcher, g, a ? a : g.a(),
                                   sm_count ? sm_count : sm_count_, stream_);
    if (err != cudaSuccess) {
      return ::testing::AssertionFailure()
             << GetParam().name << " launch on " << g.problem() << ": " << cudaGetErrorName(err);
    }
    CUDA_OK(cudaStreamSynchronize(stream_));
    return ::testing::AssertionSuccess();
  }

  cudaStream_t stream_ = nullptr;
  int sm_count_ = 0;
};

TEST_P(CudaFamilyTest, MatchesReferenceOnRaggedShapes) {
  const Family& f = GetParam();
  uint64_t seed = 1;
  for (DType dtype : f.dtypes) {
    for (const Shape& s : RaggedShapes(f)) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(g.Matches(f.budget(dtype)));
    }
  }
}

// An earlier system launched a kernel transposed, left half of C unwritten and
// still reported a plausible latency: M != N both ways, every element checked.
TEST_P(CudaFamilyTest, LaunchGeometryWritesEveryElementOfNonSquareC) {
  const Family& f = GetParam();
  const std::vector<Shape> shapes =
      f.max_m <= 16 ? std::vector<Shape>{{16, 200, 64}, {13, 3, 64}, {1, 48, 64}}
                    : std::vector<Shape>{{48, 200, 64}, {200, 48, 64}, {8, 520, 64}, {520, 8, 64}};
  uint64_t seed = 100;
  for (DType dtype : f.dtypes) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(g.Matches(f.budget(dtype)));
    }
  }
}

TEST_P(CudaFamilyTest, RepeatsBitwiseWhenClaimed) {
  const Family& f = GetParam();
  if (f.determinism < Determinism::kRunToRun) GTEST_SKIP() << f.name << " claims no determinism";
  const std::vector<Shape> shapes =
      f.max_m <= 16 ? std::vector<Shape>{{13, 333, 2049}, {16, 16, 65536}}
                    : std::vector<Shape>{{200, 136, 4096}, {16, 16, 65536}};
  uint64_t seed = 200;
  for (DType dtype : f.dtypes) {
    for (const Shape& s : shapes) {
      DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
      ASSERT_TRUE(Run(g));
      const std::vector<uint8_t> first = g.DownloadC();
      ASSERT_TRUE(Run(g));
      EXPECT_TRUE(first == g.DownloadC()) << f.name << " differs between runs on " << g.problem();
    }
  }
}

TEST_P(CudaFamilyTest, RowsDoNotDependOnMWhenClaimed) {
  const Family& f = GetParam();
  if (f.determinism < Determinism::kBatchInvariant) {
    GTEST_SKIP() << f.name << " does not claim batch invariance";
  }
  const Shape base_shape = f.max_m <= 16 ? Shape{16, 136, 1000} : Shape{520, 136, 1000};
  uint64_t seed = 300;
  for (DType dtype : f.dtypes) {
    DeviceGemm base(Problem{dtype, base_shape.m, base_shape.n, base_shape.k}, seed++);
    ASSERT_TRUE(Run(base));
    const std::vector<uint8_t> all = base.DownloadC();
    for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{9}}) {
      DeviceGemm part(base, m);
      ASSERT_TRUE(Run(part));
      const std::vector<uint8_t> rows = part.DownloadC();
      EXPECT_TRUE(std::equal(rows.begin(), rows.end(), all.begin()))
          << f.name << ": the first " << m << " rows of C differ between M=" << m << " and M="
          << base_shape.m << " (" << DTypeName(dtype) << ")";
    }
  }
}

// Operands as given and operands first copied to padded scratch (A 2 bytes off
// alignment), or 16-byte and element loads (gemv), must give the same bits.
TEST_P(CudaFamilyTest, LoadPathDoesNotChangeBits) {
  const Family& f = GetParam();
  if (!f.alignment_paths) GTEST_SKIP() << f.name << " has one load path";
  if (f.determinism < Determinism::kRunToRun) GTEST_SKIP() << f.name << " is nondeterministic";
  const Shape s = f.max_m <= 16 ? Shape{11, 264, 1024} : Shape{136, 264, 1024};
  uint64_t seed = 400;
  for (DType dtype : f.dtypes) {
    DeviceGemm g(Problem{dtype, s.m, s.n, s.k}, seed++);
    ASSERT_TRUE(Run(g));
    EXPECT_TRUE(g.Matches(f.budget(dtype)));
    const std::vector<uint8_t> aligned = g.DownloadC();
    ASSERT_TRUE(Run(g, g.misaligned_a()));
    EXPECT_TRUE(g.Matches(f.budget(dtype)));
    EXPECT_TRUE(aligned == g.DownloadC()) << f.name << ": load paths differ on " << g.problem();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaFamilyTest, ::testing::ValuesIn(AllFamilies()),
                         [](const ::testing::TestParamInfo<Family>& info) {
                           return info.param.name;
                         });

class CudaStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ARBITER_SKIP_WITHOUT_GPU(80);
    CUDA_OK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

// The launcher picks 128x128 tiles when they fill the SMs and 64x64 otherwise,
// so the tile depends on M: batch invariance needs both to give the same bits.
TEST_F(CudaStreamTest, MmaTiledTileShapeDoesNotChangeBits) {
  uint64_t seed = 500;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    DeviceGemm g(Problem{dtype, 264, 392, 1000}, seed++);
    std::vector<uint8_t> outputs[2];
    for (int i = 0; i < 2; ++i) {
      g.PoisonC();
      // Large tiles (one SM is always filled), then small ones.
      ASSERT_EQ(Launch(kMmaTiled, g, g.a(), i == 0 ? 1 : 1 << 20, stream_), cudaSuccess);
      EXPECT_TRUE(g.Matches({kMmaTiledBudgetAbs, kMmaTiledBudgetRel}));
      outputs[i] = g.DownloadC();
    }
    EXPECT_TRUE(outputs[0] == outputs[1]) << "tile shapes differ on " << g.problem();
  }
}

// The split count follows the SM count: every plan, from one split to one per
// 256 of K, must be within budget.
TEST_F(CudaStreamTest, SplitKMatchesReferenceAtEverySplitCount) {
  uint64_t seed = 600;
  for (bool atomic : {false, true}) {
    for (const Shape& s : {Shape{16, 16, 65536}, Shape{48, 200, 3000}, Shape{7, 9, 300}}) {
      DeviceGemm g(Problem{DType::kBF16, s.m, s.n, s.k}, seed++);
      for (int sm_count : {1, 8, 132, 1 << 20}) {
        g.PoisonC();
        ASSERT_EQ(Launch(atomic ? kSplitKAtomic : kSplitK, g, g.a(), sm_count, stream_),
                  cudaSuccess);
        EXPECT_TRUE(g.Matches({kSplitKBudgetAbs, kSplitKBudgetRel}))
            << (atomic ? "splitk_atomic" : "splitk") << " at sm_count " << sm_count;
      }
    }
  }
}

// The gemv K split follows N, K and the SM count: every plan, from one block
// per column strip to the most splits, must be within budget.
TEST_F(CudaStreamTest, GemvMatchesReferenceAtEverySplitCount) {
  uint64_t seed = 700;
  for (const Shape& s : {Shape{1, 4096, 4096}, Shape{16, 40, 8200}, Shape{5, 33, 3001},
                         Shape{3, 1000, 20000}}) {
    DeviceGemm g(Problem{DType::kF16, s.m, s.n, s.k}, seed++);
    for (int sm_count : {1, 8, 132, 1 << 20}) {
      g.PoisonC();
      ASSERT_EQ(Launch(kGemv, g, g.a(), sm_count, stream_), cudaSuccess);
      EXPECT_TRUE(g.Matches({kGemvBudgetAbs, kGemvBudgetRel})) << "gemv at sm_count " << sm_count;
    }
  }
}

// Refusals need no device: they return before any CUDA call.
TEST(CudaFamilyLaunchers, RefuseWhatTheyDoNotCover) {
  LaunchArgs gemv;
  gemv.dtype = DType::kF16;
  gemv.m = kGemvMaxM + 1;
  gemv.n = gemv.k = 64;
  EXPECT_EQ(kGemv.launch(gemv, nullptr), cudaErrorInvalidValue);
  gemv.m = 1;
  gemv.n = 64;
  gemv.k = 65536;  // two column blocks for 132 SMs: splits K, needs workspace
  ASSERT_GT(kGemv.workspace_bytes(gemv), 0u);
  EXPECT_EQ(kGemv.launch(gemv, nullptr), cudaErrorInvalidValue);
  LaunchArgs warp;
  warp.dtype = DType::kF32;
  warp.m = warp.n = warp.k = 64;
  EXPECT_EQ(kMmaWarp.launch(warp, nullptr), cudaErrorInvalidValue);
  LaunchArgs tiled;
  tiled.dtype = DType::kF16;
  tiled.m = 0;
  tiled.n = tiled.k = 64;
  EXPECT_EQ(kMmaTiled.launch(tiled, nullptr), cudaErrorInvalidValue);
  LaunchArgs splitk;
  splitk.dtype = DType::kF16;
  splitk.m = splitk.n = splitk.k = 64;  // no workspace
  EXPECT_EQ(kSplitK.launch(splitk, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kSplitKAtomic.launch(splitk, nullptr), cudaErrorInvalidValue);
  tiled.m = 64;
  tiled.k = 63;  // needs padded operands: workspace
  ASSERT_GT(kMmaTiled.workspace_bytes(tiled), 0u);
  EXPECT_EQ(kMmaTiled.launch(tiled, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace arbiter::kernels
