// Device tests of the wgmma GEMM (label gpu): every tile config and dtype
// against an f64 host reference on NaN-poisoned C at ragged and non-square
// shapes, the launch geometry on M != N, and the determinism it claims
// (bitwise run-to-run, rows independent of M). Skipped without an sm_90 GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/wgmma/wgmma_gemm.h"

namespace arbiter::wgmma {
namespace {

// The candidate contract's budget (kernels/wgmma/wgmma_candidate.cc).
constexpr double kAbs = 1e-6;
constexpr double kRel = 1e-5;

// Empty when an sm_90 device is present; else why the device tests skip.
std::string NoHopperReason() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return "no CUDA device";
  }
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, 0) != cudaSuccess) return "cannot read device properties";
  if (props.major != 9 || props.minor != 0) {
    return "device is sm_" + std::to_string(props.major * 10 + props.minor) + ", kernels are sm_90a";
  }
  return "";
}

#define SKIP_WITHOUT_HOPPER()                                             \
  do {                                                                    \
    const std::string why = NoHopperReason();                             \
    if (!why.empty()) GTEST_SKIP() << "wgmma device test skipped: " << why; \
  } while (0)

uint16_t ToStorage(WgmmaDType dtype, float v) {
  if (dtype == WgmmaDType::kBF16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  return __half_as_ushort(__float2half_rn(v));
}

double FromStorage(WgmmaDType dtype, uint16_t bits) {
  if (dtype == WgmmaDType::kBF16) return __bfloat162float(__ushort_as_bfloat16(bits));
  return __half2float(__ushort_as_half(bits));
}

std::vector<uint16_t> RandomMatrix(WgmmaDType dtype, int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> out(static_cast<size_t>(count));
  for (uint16_t& v : out) v = ToStorage(dtype, dist(rng));
  return out;
}

// Device memory freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr_, bytes) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// C = A * B on the device, C poisoned with NaN (0xFFFF in both dtypes) first,
// on a grid planned for `num_sms` SMs (0: the device's), with the workspace
// the tile asks for (also NaN-poisoned).
std::vector<uint16_t> RunGemm(WgmmaDType dtype, WgmmaTile tile, int64_t m, int64_t n, int64_t k,
                              const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                              int num_sms = 0) {
  DeviceBuffer da(a.size() * 2), db(b.size() * 2), dc(static_cast<size_t>(m * n) * 2);
  EXPECT_NE(da.get(), nullptr);
  EXPECT_NE(dc.get(), nullptr);
  EXPECT_EQ(cudaMemcpy(da.get(), a.data(), a.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(db.get(), b.data(), b.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemset(dc.get(), 0xFF, static_cast<size_t>(m * n) * 2), cudaSuccess);
  WgmmaGemmArgs args;
  args.dtype = dtype;
  args.tile = tile;
  args.m = m, args.n = n, args.k = k;
  args.a = da.get(), args.b = db.get(), args.c = dc.get();
  args.num_sms = num_sms;
  args.workspace_bytes = WgmmaWorkspaceBytes(args);
  DeviceBuffer workspace(std::max<size_t>(args.workspace_bytes, 16));
  EXPECT_EQ(cudaMemset(workspace.get(), 0xFF, std::max<size_t>(args.workspace_bytes, 16)), cudaSuccess);
  args.workspace = workspace.get();
  EXPECT_EQ(LaunchWgmmaGemm(args, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> c(static_cast<size_t>(m * n));
  EXPECT_EQ(cudaMemcpy(c.data(), dc.get(), c.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return c;
}

std::vector<double> Reference(WgmmaDType dtype, int64_t m, int64_t n, int64_t k,
                              const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  std::vector<double> bd(b.size());
  for (size_t i = 0; i < b.size(); ++i) bd[i] = FromStorage(dtype, b[i]);
  std::vector<double> ref(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    double* row = &ref[i * n];
    for (int64_t kk = 0; kk < k; ++kk) {
      const double av = FromStorage(dtype, a[i * k + kk]);
      const double* brow = &bd[kk * n];
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
  }
  return ref;
}

// Elements of C outside the contract's tolerance of the reference (NaN, i.e.
// unwritten, among them); the first few are reported, prefixed by `what`.
int64_t Failures(WgmmaDType dtype, int64_t n, int64_t k, const std::vector<uint16_t>& c,
                 const std::vector<double>& ref, const std::string& what) {
  double max_ref = 0;
  for (double v : ref) max_ref = std::max(max_ref, std::fabs(v));
  const double u = dtype == WgmmaDType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  int64_t failures = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double got = FromStorage(dtype, c[i]);
    const double tol = kAbs + kRel * std::sqrt(static_cast<double>(k)) * max_ref + u * std::fabs(ref[i]);
    if (!(std::fabs(got - ref[i]) <= tol) && ++failures <= 5) {  // NaN (unwritten) fails too
      ADD_FAILURE() << what << ": C[" << i / n << "," << i % n << "] = " << got << ", reference "
                    << ref[i] << ", tolerance " << tol;
    }
  }
  return failures;
}

struct GemmCase {
  int64_t m, n, k;
};

using Param = std::tuple<WgmmaDType, WgmmaTile, GemmCase>;

class WgmmaGemmTest : public ::testing::TestWithParam<Param> {};

TEST_P(WgmmaGemmTest, MatchesF64ReferenceOnPoisonedOutput) {
  SKIP_WITHOUT_HOPPER();
  const auto [dtype, tile, shape] = GetParam();
  const auto [m, n, k] = shape;
  const auto a = RandomMatrix(dtype, m * k, static_cast<uint32_t>(m * 7 + k));
  const auto b = RandomMatrix(dtype, k * n, static_cast<uint32_t>(n * 13 + k));
  const auto c = RunGemm(dtype, tile, m, n, k, a, b);
  const auto ref = Reference(dtype, m, n, k, a, b);
  EXPECT_EQ(Failures(dtype, n, k, c, ref, WgmmaTileName(tile)), 0)
      << "elements outside the contract's tolerance (or unwritten)";
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const auto [dtype, tile, shape] = info.param;
  return std::string(dtype == WgmmaDType::kBF16 ? "bf16_" : "f16_") + "tile" + WgmmaTileName(tile) +
         "_" + std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k);
}

INSTANTIATE_TEST_SUITE_P(
    RaggedAndNonSquare, WgmmaGemmTest,
    ::testing::Combine(::testing::Values(WgmmaDType::kBF16, WgmmaDType::kF16),
                       ::testing::ValuesIn(kAllWgmmaTiles),
                       ::testing::Values(GemmCase{128, 128, 64},   // one exact tile
                                         GemmCase{1, 256, 64},     // a single row
                                         GemmCase{777, 328, 2048}, // ragged M and N tiles, long K
                                         GemmCase{300, 1000, 72},  // M < N, K tail of 8
                                         GemmCase{1000, 136, 8},   // M > N, K below one stage
                                         GemmCase{129, 264, 520},  // one row into a 2nd M tile
                                         GemmCase{520, 1032, 1024},  // many k-blocks per tile
                                         GemmCase{2056, 2048, 64})),  // more tiles than SMs: CTAs loop
    ParamName);

// The cp.async tiles take any even N: B rows 4-byte aligned only, C stored from
// registers. Ragged N tiles and tails, a vocabulary-sized N, K below a stage.
INSTANTIATE_TEST_SUITE_P(
    RaggedEvenN, WgmmaGemmTest,
    ::testing::Combine(::testing::Values(WgmmaDType::kBF16, WgmmaDType::kF16),
                       ::testing::Values(WgmmaTile::k128x128CpAsync, WgmmaTile::k128x256CpAsync),
                       ::testing::Values(GemmCase{128, 130, 64},    // one tile and 2 columns
                                         GemmCase{1, 258, 64},      // a single row
                                         GemmCase{777, 330, 2048},  // ragged M and N tiles, long K
                                         GemmCase{300, 1002, 72},   // M < N, K tail of 8
                                         GemmCase{1000, 138, 8},    // M > N, K below one stage
                                         GemmCase{129, 30522, 64},  // a ragged vocabulary
                                         GemmCase{2056, 2050, 64})),  // CTAs loop over tiles
    ParamName);

TEST(WgmmaGeometryTest, GridAxisIsTilesAndEachTileMapsToOneMRowBlockAndNColumnBlock) {
  for (WgmmaTile tile : kAllWgmmaTiles) {
    for (const auto& [m, n] : {std::pair<int64_t, int64_t>{300, 1000}, {1000, 300}, {4095, 8192}}) {
      const WgmmaGeometry g = WgmmaLaunchGeometry(tile, m, n, 4096, 132);
      EXPECT_EQ(g.tile_m, WgmmaTileM(tile));
      EXPECT_EQ(g.tile_n, WgmmaTileN(tile));
      // M is walked by tile rows of tile_m, N by tile columns of tile_n: never swapped.
      EXPECT_EQ(g.tiles_m, (m + g.tile_m - 1) / g.tile_m) << m << "x" << n;
      EXPECT_EQ(g.tiles_n, (n + g.tile_n - 1) / g.tile_n) << m << "x" << n;
      // Clusters of `splits` CTAs, as many as fit the SMs, never more than
      // tiles; stream-K: one CTA per SM, never more than units.
      EXPECT_GE(g.splits, 1);
      EXPECT_LE(g.splits, 8);
      if (WgmmaTileStreamK(tile)) {
        EXPECT_EQ(g.grid_x, std::min<int64_t>(g.units(), 132));
      } else {
        EXPECT_EQ(g.grid_x, std::min(g.tiles(), 132 / g.splits) * g.splits);
      }
      if (g.splits > 1) {
        EXPECT_TRUE(WgmmaTileSplitsK(tile));
        // Every rank gets k-blocks: (splits - 1) full ranges leave some for the last.
        EXPECT_LT((g.splits - 1) * g.kb_per_split, 4096 / 64);
      }
      std::set<std::pair<int, int>> seen;
      for (int t = 0; t < g.tiles(); ++t) {
        int mt = -1, nt = -1;
        WgmmaTileAt(t, g.tiles_m, g.tiles_n, g.group_m, &mt, &nt);
        ASSERT_GE(mt, 0);
        ASSERT_LT(mt, g.tiles_m);
        ASSERT_GE(nt, 0);
        ASSERT_LT(nt, g.tiles_n);
        EXPECT_TRUE(seen.insert({mt, nt}).second) << "tile " << t << " repeats (" << mt << "," << nt << ")";
      }
      EXPECT_EQ(static_cast<int>(seen.size()), g.tiles());
    }
  }
}

TEST(WgmmaGeometryDeviceTest, NonSquareOutputIsWrittenByRowAndColumnAtTheRightPlace) {
  SKIP_WITHOUT_HOPPER();
  // A = [I | 0] picks rows of B: C[i, j] = B[i, j] exactly. A swapped M/N axis
  // would leave NaN (unwritten) or put B's values at the wrong place.
  for (WgmmaTile tile : kAllWgmmaTiles) {
    for (const auto& [m, n] : {std::pair<int64_t, int64_t>{136, 520}, {520, 136}}) {
      const int64_t k = 520;
      std::vector<uint16_t> a(static_cast<size_t>(m * k), ToStorage(WgmmaDType::kBF16, 0.0f));
      for (int64_t i = 0; i < m; ++i) a[i * k + i] = ToStorage(WgmmaDType::kBF16, 1.0f);
      const auto b = RandomMatrix(WgmmaDType::kBF16, k * n, 99);
      const auto c = RunGemm(WgmmaDType::kBF16, tile, m, n, k, a, b);
      int64_t wrong = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) wrong += c[i * n + j] != b[i * n + j];
      }
      EXPECT_EQ(wrong, 0) << WgmmaTileName(tile) << " " << m << "x" << n << "x" << k;
    }
  }
}

TEST(WgmmaDeterminismTest, RepeatedRunsAreBitwiseIdentical) {
  SKIP_WITHOUT_HOPPER();
  const int64_t m = 1000, n = 1032, k = 2048;
  for (WgmmaTile tile : kAllWgmmaTiles) {
    const auto a = RandomMatrix(WgmmaDType::kBF16, m * k, 5);
    const auto b = RandomMatrix(WgmmaDType::kBF16, k * n, 6);
    const auto first = RunGemm(WgmmaDType::kBF16, tile, m, n, k, a, b);
    const auto second = RunGemm(WgmmaDType::kBF16, tile, m, n, k, a, b);
    EXPECT_EQ(first, second) << WgmmaTileName(tile);
  }
}

TEST(WgmmaDeterminismTest, RowsOfCDoNotDependOnM) {
  SKIP_WITHOUT_HOPPER();
  // The batch_invariant claim: row i of C is bitwise the same whether it is
  // computed inside M = 1000 or with only the first few rows of A.
  const int64_t n = 1032, k = 1024, full_m = 1000;
  for (WgmmaDType dtype : {WgmmaDType::kBF16, WgmmaDType::kF16}) {
    for (WgmmaTile tile : kAllWgmmaTiles) {
      // Their K split follows M: no claim.
      if (WgmmaTileSplitsK(tile) || WgmmaTileStreamK(tile)) continue;
      const auto a = RandomMatrix(dtype, full_m * k, 7);
      const auto b = RandomMatrix(dtype, k * n, 8);
      const auto full = RunGemm(dtype, tile, full_m, n, k, a, b);
      for (int64_t m : {1, 7, 64, 129, 500}) {
        const std::vector<uint16_t> a_prefix(a.begin(), a.begin() + m * k);
        const auto part = RunGemm(dtype, tile, m, n, k, a_prefix, b);
        EXPECT_EQ(0, std::memcmp(part.data(), full.data(), part.size() * 2))
            << WgmmaTileName(tile) << " rows differ at M=" << m;
      }
    }
  }
}

// The split tile at shapes whose tiles leave SMs idle: clusters of 2 to 8
// CTAs add their partials (64x256 tiles: 1, 16 and 36 of them), and at a count
// of SMs that forces one split. Every element checked on poisoned C, twice (bits
// repeat: the ranks are added in a fixed order).
TEST(WgmmaSplitKTest, ClusterSplitsMatchReferenceAndRepeat) {
  SKIP_WITHOUT_HOPPER();
  for (const GemmCase& s : {GemmCase{16, 256, 4096}, GemmCase{1, 4096, 4096},
                            GemmCase{100, 4104, 3000}, GemmCase{64, 2048, 520}}) {
    const WgmmaGeometry g = WgmmaLaunchGeometry(WgmmaTile::k64x256SplitK, s.m, s.n, s.k, 132);
    for (WgmmaDType dtype : {WgmmaDType::kBF16, WgmmaDType::kF16}) {
      const auto a = RandomMatrix(dtype, s.m * s.k, 11);
      const auto b = RandomMatrix(dtype, s.k * s.n, 12);
      const auto c = RunGemm(dtype, WgmmaTile::k64x256SplitK, s.m, s.n, s.k, a, b);
      const auto ref = Reference(dtype, s.m, s.n, s.k, a, b);
      EXPECT_EQ(Failures(dtype, s.n, s.k, c, ref, "split"), 0)
          << s.m << "x" << s.n << "x" << s.k << " in " << g.splits << " splits";
      EXPECT_EQ(c, RunGemm(dtype, WgmmaTile::k64x256SplitK, s.m, s.n, s.k, a, b))
          << "bits differ between runs at " << g.splits << " splits";
    }
  }
}

// The stream-K tiles on grids forced to 7 CTAs and to one per SM, at shapes
// that hit every segment case (wgmma_gemm.h; the host test walks the same
// partitions): CTA ranges inside one tile and an owner with many contributors
// (one tile of 64 k-blocks), owners with one contributor, whole tiles, fewer
// units than SMs, M = 1, M = 96 with a ragged N tile and K not a multiple of
// 64, K = 8. Every element checked on poisoned C (and poisoned workspace), then
// the bits repeated on the same stream: the flags were left at zero, and the
// partials are added in CTA order.
TEST(WgmmaStreamKTest, EverySegmentCaseMatchesReferenceAndRepeatsBitwise) {
  SKIP_WITHOUT_HOPPER();
  int device_sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&device_sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  for (const GemmCase& s : {GemmCase{1, 256, 4096}, GemmCase{96, 3080, 8200}, GemmCase{1, 4104, 3000},
                            GemmCase{300, 1000, 72}, GemmCase{1000, 136, 8}, GemmCase{128, 256, 64},
                            GemmCase{777, 328, 2048}}) {
    for (WgmmaDType dtype : {WgmmaDType::kBF16, WgmmaDType::kF16}) {
      // The f64 reference of the largest shape takes seconds: bf16 only there.
      if (dtype == WgmmaDType::kF16 && s.m * s.n * s.k > (int64_t{1} << 30)) continue;
      const auto a = RandomMatrix(dtype, s.m * s.k, 21);
      const auto b = RandomMatrix(dtype, s.k * s.n, 22);
      const auto ref = Reference(dtype, s.m, s.n, s.k, a, b);
      for (WgmmaTile tile : kAllWgmmaTiles) {
        if (!WgmmaTileStreamK(tile)) continue;
        for (int sms : {7, device_sms}) {
          const WgmmaGeometry g = WgmmaLaunchGeometry(tile, s.m, s.n, s.k, sms);
          const std::string what = std::string(WgmmaTileName(tile)) + " " + std::to_string(s.m) + "x" +
                                   std::to_string(s.n) + "x" + std::to_string(s.k) + " on " +
                                   std::to_string(g.grid_x) + " CTAs (" + std::to_string(g.units()) + " units)";
          const auto c = RunGemm(dtype, tile, s.m, s.n, s.k, a, b, sms);
          EXPECT_EQ(Failures(dtype, s.n, s.k, c, ref, what), 0) << what;
          EXPECT_EQ(c, RunGemm(dtype, tile, s.m, s.n, s.k, a, b, sms)) << what << ": bits differ between runs";
        }
      }
    }
  }
}

TEST(WgmmaStreamKTest, RefusesMissingWorkspaceAndGridsLargerThanTheDevice) {
  WgmmaGemmArgs args;
  args.tile = WgmmaTile::k128x256StreamK;
  args.m = 1000, args.n = 1032, args.k = 2048;
  args.a = args.b = reinterpret_cast<const void*>(uintptr_t{256});
  args.c = reinterpret_cast<void*>(uintptr_t{256});
  args.num_sms = 132;
  EXPECT_EQ(WgmmaUnsupportedReason(args), nullptr);
  // No workspace, too little, or misaligned: nothing launched.
  EXPECT_EQ(LaunchWgmmaGemm(args, nullptr), cudaErrorInvalidValue);
  args.workspace = reinterpret_cast<void*>(uintptr_t{256});
  args.workspace_bytes = WgmmaWorkspaceBytes(args) - 16;
  EXPECT_EQ(LaunchWgmmaGemm(args, nullptr), cudaErrorInvalidValue);
  args.workspace_bytes += 16;
  args.workspace = reinterpret_cast<void*>(uintptr_t{264});
  EXPECT_EQ(LaunchWgmmaGemm(args, nullptr), cudaErrorInvalidValue);

  SKIP_WITHOUT_HOPPER();
  // 1280 units planned for 1024 "SMs": more CTAs than the device holds at once,
  // whose owners could wait forever; refused before launching.
  DeviceBuffer a(1000 * 2048 * 2), b(2048 * 1032 * 2), c(1000 * 1032 * 2);
  args.a = a.get(), args.b = b.get(), args.c = c.get();
  args.num_sms = 1024;
  args.workspace_bytes = WgmmaWorkspaceBytes(args);
  DeviceBuffer workspace(args.workspace_bytes);
  args.workspace = workspace.get();
  EXPECT_EQ(LaunchWgmmaGemm(args, nullptr), cudaErrorCooperativeLaunchTooLarge);
}

TEST(WgmmaCoverageTest, RejectsStridesTmaCannotAddressWithoutLaunching) {
  WgmmaGemmArgs args;
  args.m = 64, args.n = 64, args.k = 12;  // K % 8 != 0
  args.a = args.b = reinterpret_cast<const void*>(uintptr_t{256});
  args.c = reinterpret_cast<void*>(uintptr_t{256});
  EXPECT_NE(WgmmaUnsupportedReason(args), nullptr);
  EXPECT_EQ(LaunchWgmmaGemm(args, nullptr), cudaErrorInvalidValue);
  args.k = 64, args.n = 60;  // N % 8 != 0
  EXPECT_NE(WgmmaUnsupportedReason(args), nullptr);
  EXPECT_EQ(LaunchWgmmaGemm(args, nullptr), cudaErrorInvalidValue);
  args.n = 64;
  args.a = reinterpret_cast<const void*>(uintptr_t{258});  // A not 16-byte aligned
  EXPECT_NE(WgmmaUnsupportedReason(args), nullptr);
  args.a = reinterpret_cast<const void*>(uintptr_t{256});
  EXPECT_EQ(WgmmaUnsupportedReason(args), nullptr);
  // The cp.async tiles take an even N (4-byte rows), not an odd one; A still
  // goes through TMA (K % 8).
  for (WgmmaTile tile : {WgmmaTile::k128x128CpAsync, WgmmaTile::k128x256CpAsync}) {
    args.tile = tile;
    args.n = 30522;
    EXPECT_EQ(WgmmaUnsupportedReason(args), nullptr) << WgmmaTileName(tile);
    args.n = 30521;
    EXPECT_NE(WgmmaUnsupportedReason(args), nullptr) << WgmmaTileName(tile);
    EXPECT_EQ(LaunchWgmmaGemm(args, nullptr), cudaErrorInvalidValue);
    args.n = 30522;
    args.k = 12;
    EXPECT_NE(WgmmaUnsupportedReason(args), nullptr) << WgmmaTileName(tile);
    args.k = 64;
    args.b = reinterpret_cast<const void*>(uintptr_t{258});  // B 2-byte aligned only
    EXPECT_NE(WgmmaUnsupportedReason(args), nullptr) << WgmmaTileName(tile);
    args.b = reinterpret_cast<const void*>(uintptr_t{260});  // 4-byte aligned is enough
    EXPECT_EQ(WgmmaUnsupportedReason(args), nullptr) << WgmmaTileName(tile);
    args.b = reinterpret_cast<const void*>(uintptr_t{256});
  }
}

}  // namespace
}  // namespace arbiter::wgmma
