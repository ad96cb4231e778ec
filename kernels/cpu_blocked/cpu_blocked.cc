#include "kernels/cpu_blocked/cpu_blocked.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace arbiter {
namespace {

constexpr int kVersion = 1;

// Register tile: kMr rows x 64 bytes (16 f32 or 8 f64). That is 6 zmm
// accumulators with AVX-512, 12 ymm with AVX2 (of 16 registers, leaving room
// for B and the broadcast), and spills only in the SSE2 baseline.
constexpr int kMr = 6;
constexpr int kVectorBytes = 64;
// K block: an A micro-panel (6 x 256 x 4 = 6 KiB) and a B micro-panel
// (256 x 16 x 4 = 16 KiB) stay in a 32-48 KiB L1 while the tile accumulates.
constexpr int64_t kKc = 256;
// M block: the packed A block (72 x 256 x 4 = 72 KiB) stays in L2 while the B
// micro-panels stream past it. A multiple of kMr.
constexpr int64_t kMc = 72;
// N block: the packed B block (256 x 512 x 4 = 512 KiB) stays in L2/L3 while
// every A micro-panel of the M block reuses it.
constexpr int64_t kNc = 512;
// Below this many multiply-adds the thread start-up costs more than it saves.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 18;

// Accumulators of one tile row: 64 bytes, as one zmm (x86-64-v4), two ymm
// (x86-64-v3) or four xmm (baseline SSE2). Each ISA variant uses its native
// width - GCC lowers a wider generic vector badly - but every lane does the
// same multiply-add, so the variants differ only in FMA (v3/v4) versus a
// rounded multiply then add (baseline).
template <typename T, int kBytes>
struct VectorOf {
  typedef T type __attribute__((vector_size(kBytes)));
};
template <typename T>
constexpr int kNr = kVectorBytes / sizeof(T);

// acc[kMr x nr] += a[kc x kMr]^T * b[kc x nr], k in order. Inlined into each
// ISA variant below.
template <typename T, int kBytes>
[[gnu::always_inline]] inline void MicroKernelBody(int64_t kc, const T* __restrict a,
                                                   const T* __restrict b, T* __restrict acc) {
  using V = typename VectorOf<T, kBytes>::type;
  constexpr int nr = kNr<T>;
  constexpr int lanes = kBytes / sizeof(T);
  constexpr int per_row = kVectorBytes / kBytes;
  V c[kMr][per_row];
  for (int i = 0; i < kMr; ++i) {
    for (int v = 0; v < per_row; ++v) std::memcpy(&c[i][v], acc + i * nr + v * lanes, kBytes);
  }
  for (int64_t p = 0; p < kc; ++p) {
    V bv[per_row];
    for (int v = 0; v < per_row; ++v) std::memcpy(&bv[v], b + p * nr + v * lanes, kBytes);
    for (int i = 0; i < kMr; ++i) {
      const T a_ip = a[p * kMr + i];
      for (int v = 0; v < per_row; ++v) c[i][v] += a_ip * bv[v];
    }
  }
  for (int i = 0; i < kMr; ++i) {
    for (int v = 0; v < per_row; ++v) std::memcpy(acc + i * nr + v * lanes, &c[i][v], kBytes);
  }
}

template <typename T>
using MicroKernelFn = void (*)(int64_t kc, const T* a, const T* b, T* acc);

template <typename T>
__attribute__((target("arch=x86-64-v4"))) void MicroKernelV4(int64_t kc, const T* a, const T* b,
                                                              T* acc) {
  MicroKernelBody<T, 64>(kc, a, b, acc);
}
template <typename T>
__attribute__((target("arch=x86-64-v3"))) void MicroKernelV3(int64_t kc, const T* a, const T* b,
                                                              T* acc) {
  MicroKernelBody<T, 32>(kc, a, b, acc);
}
template <typename T>
void MicroKernelBaseline(int64_t kc, const T* a, const T* b, T* acc) {
  MicroKernelBody<T, 16>(kc, a, b, acc);
}

// The best variant the CPU supports, decided once, when the candidate is made:
// every call on a machine then runs the same instructions.
CpuIsa Resolve(CpuIsa isa) {
  if (isa != CpuIsa::kAuto) return isa;
  if (CpuSupports(CpuIsa::kX86_64_V4)) return CpuIsa::kX86_64_V4;
  if (CpuSupports(CpuIsa::kX86_64_V3)) return CpuIsa::kX86_64_V3;
  return CpuIsa::kBaseline;
}

template <typename T>
MicroKernelFn<T> MicroKernelFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kX86_64_V4: return MicroKernelV4<T>;
    case CpuIsa::kX86_64_V3: return MicroKernelV3<T>;
    default: return MicroKernelBaseline<T>;
  }
}

// Storage type and compute type of each dtype.
template <DType D>
struct Traits;
template <>
struct Traits<DType::kF32> {
  using Storage = float;
  using Compute = float;
  static float Load(float v) { return v; }
  static float Store(float v) { return v; }
};
template <>
struct Traits<DType::kF64> {
  using Storage = double;
  using Compute = double;
  static double Load(double v) { return v; }
  static double Store(double v) { return v; }
};
// Every f16 value widened by the engine's HalfToFloat (exact), so packing is
// one load per element instead of a call with a subnormal branch.
const float* HalfTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(1 << 16);
    for (uint32_t bits = 0; bits < t.size(); ++bits) t[bits] = HalfToFloat(static_cast<uint16_t>(bits));
    return t;
  }();
  return table.data();
}
template <>
struct Traits<DType::kF16> {
  using Storage = uint16_t;
  using Compute = float;
  static float Load(uint16_t v) { return HalfTable()[v]; }
  static uint16_t Store(float v) { return FloatToHalf(v); }
};
template <>
struct Traits<DType::kBF16> {
  using Storage = uint16_t;
  using Compute = float;
  // bf16 is the top half of an f32: widening is exact, a shift.
  static float Load(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }
  static uint16_t Store(float v) { return FloatToBFloat16(v); }
};

// Packs A[i0 : i0+mc, k0 : k0+kc] into kMr-row micro-panels, k-major within
// each (dst[panel][p][r]); rows past mc are zero.
template <DType D>
void PackA(const typename Traits<D>::Storage* a, int64_t lda, int64_t i0, int64_t mc, int64_t k0,
           int64_t kc, typename Traits<D>::Compute* dst) {
  using T = typename Traits<D>::Compute;
  for (int64_t ir = 0; ir < mc; ir += kMr) {
    const int64_t rows = std::min<int64_t>(kMr, mc - ir);
    for (int64_t p = 0; p < kc; ++p) {
      T* out = dst + ir * kc + p * kMr;
      for (int64_t r = 0; r < rows; ++r) out[r] = Traits<D>::Load(a[(i0 + ir + r) * lda + k0 + p]);
      for (int64_t r = rows; r < kMr; ++r) out[r] = T(0);
    }
  }
}

// Packs B[k0 : k0+kc, j0 : j0+nc] into nr-column micro-panels, k-major within
// each (dst[panel][p][c]); columns past nc are zero.
template <DType D>
void PackB(const typename Traits<D>::Storage* b, int64_t ldb, int64_t k0, int64_t kc, int64_t j0,
           int64_t nc, typename Traits<D>::Compute* dst) {
  using T = typename Traits<D>::Compute;
  constexpr int nr = kNr<T>;
  for (int64_t jr = 0; jr < nc; jr += nr) {
    const int64_t cols = std::min<int64_t>(nr, nc - jr);
    for (int64_t p = 0; p < kc; ++p) {
      const typename Traits<D>::Storage* in = b + (k0 + p) * ldb + j0 + jr;
      T* out = dst + jr * kc + p * nr;
      for (int64_t c = 0; c < cols; ++c) out[c] = Traits<D>::Load(in[c]);
      for (int64_t c = cols; c < nr; ++c) out[c] = T(0);
    }
  }
}

// Per-thread scratch, sized for one (kMc x kNc) block of C.
template <typename T>
struct Workspace {
  std::vector<T> a_panel = std::vector<T>(kMc * kKc);
  std::vector<T> b_panel = std::vector<T>(kKc * ((kNc + kNr<T> - 1) / kNr<T>) * kNr<T>);
  std::vector<T> acc = std::vector<T>(kMc * ((kNc + kNr<T> - 1) / kNr<T>) * kNr<T>);
};

// C[i0 : i0+mc, j0 : j0+nc], all of K.
template <DType D>
void ComputeBlock(const GemmArgs& args, int64_t i0, int64_t j0,
                  MicroKernelFn<typename Traits<D>::Compute> micro_kernel,
                  Workspace<typename Traits<D>::Compute>& ws) {
  using S = typename Traits<D>::Storage;
  using T = typename Traits<D>::Compute;
  constexpr int nr = kNr<T>;
  const Problem& p = args.problem;
  const S* a = static_cast<const S*>(args.a);
  const S* b = static_cast<const S*>(args.b);
  S* c = static_cast<S*>(args.c);
  const int64_t mc = std::min(kMc, p.m - i0);
  const int64_t nc = std::min(kNc, p.n - j0);
  const int64_t m_panels = (mc + kMr - 1) / kMr;
  const int64_t n_panels = (nc + nr - 1) / nr;
  constexpr int64_t kTile = kMr * nr;

  std::fill(ws.acc.begin(), ws.acc.begin() + m_panels * n_panels * kTile, T(0));
  for (int64_t k0 = 0; k0 < p.k; k0 += kKc) {
    const int64_t kc = std::min(kKc, p.k - k0);
    PackA<D>(a, p.k, i0, mc, k0, kc, ws.a_panel.data());
    PackB<D>(b, p.n, k0, kc, j0, nc, ws.b_panel.data());
    for (int64_t jp = 0; jp < n_panels; ++jp) {
      for (int64_t ip = 0; ip < m_panels; ++ip) {
        micro_kernel(kc, ws.a_panel.data() + ip * kMr * kc, ws.b_panel.data() + jp * nr * kc,
                    ws.acc.data() + (jp * m_panels + ip) * kTile);
      }
    }
  }
  for (int64_t r = 0; r < mc; ++r) {
    const int64_t ip = r / kMr;
    S* c_row = c + (i0 + r) * p.n + j0;
    for (int64_t col = 0; col < nc; ++col) {
      const T* tile = ws.acc.data() + ((col / nr) * m_panels + ip) * kTile;
      c_row[col] = Traits<D>::Store(tile[(r % kMr) * nr + col % nr]);
    }
  }
}

template <DType D>
absl::Status RunBlocked(const GemmArgs& args, int threads, CpuIsa isa) {
  const Problem& p = args.problem;
  if (p.dtype != D) {
    return absl::InvalidArgumentError("cpu_blocked: member " + std::string(DTypeName(D)) +
                                      " launched for " + p.ToString());
  }
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) {
    return absl::InvalidArgumentError("cpu_blocked: null operand for " + p.ToString());
  }
  if (p.m < 0 || p.n < 0 || p.k < 0) {
    return absl::InvalidArgumentError("cpu_blocked: negative dimension in " + p.ToString());
  }
  if (!CpuSupports(isa)) {
    return absl::FailedPreconditionError("cpu_blocked: forced micro-kernel " +
                                         std::string(CpuIsaName(isa)) + " is not supported here");
  }
  if (p.m == 0 || p.n == 0) return absl::OkStatus();
  const MicroKernelFn<typename Traits<D>::Compute> micro_kernel =
      MicroKernelFor<typename Traits<D>::Compute>(isa);
  const int64_t m_blocks = (p.m + kMc - 1) / kMc;
  const int64_t n_blocks = (p.n + kNc - 1) / kNc;
  const int64_t blocks = m_blocks * n_blocks;
  const double macs = static_cast<double>(p.m) * p.n * p.k;
  const int64_t workers = std::clamp<int64_t>(
      std::min<int64_t>(threads, static_cast<int64_t>(macs / kMinMacsPerThread)), 1, blocks);

  // Blocks are claimed dynamically: which thread computes a block changes
  // timing only, never the block's arithmetic.
  std::atomic<int64_t> next{0};
  auto work = [&] {
    Workspace<typename Traits<D>::Compute> ws;
    for (int64_t blk = next.fetch_add(1); blk < blocks; blk = next.fetch_add(1)) {
      ComputeBlock<D>(args, (blk / n_blocks) * kMc, (blk % n_blocks) * kNc, micro_kernel, ws);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  for (int64_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return absl::OkStatus();
}

CandidateMember Member(DType dtype, AccuracyBudget accuracy, int threads, CpuIsa isa) {
  CandidateMember member;
  member.contract.dtype = dtype;
  member.contract.entry = "cpu_blocked<" + std::string(DTypeName(dtype)) + ">";
  member.contract.accuracy = accuracy;
  member.contract.determinism = Determinism::kBatchInvariant;
  member.contract.arch = "cpu";
  switch (dtype) {
    case DType::kF32:
      member.run = [=](const GemmArgs& args) { return RunBlocked<DType::kF32>(args, threads, isa); };
      break;
    case DType::kF64:
      member.run = [=](const GemmArgs& args) { return RunBlocked<DType::kF64>(args, threads, isa); };
      break;
    case DType::kF16:
      member.run = [=](const GemmArgs& args) { return RunBlocked<DType::kF16>(args, threads, isa); };
      break;
    case DType::kBF16:
      member.run = [=](const GemmArgs& args) { return RunBlocked<DType::kBF16>(args, threads, isa); };
      break;
  }
  return member;
}

}  // namespace

bool CpuSupports(CpuIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::kAuto:
    case CpuIsa::kBaseline: return true;
#if defined(__clang__) && __clang_major__ < 15
    // clang 14 (the sanitizer and fuzz builds) knows no level names here: the
    // levels' defining features (F16C, LZCNT and MOVBE, which it cannot query,
    // came in the same CPUs as AVX2 + FMA + BMI2).
    case CpuIsa::kX86_64_V3:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
    case CpuIsa::kX86_64_V4:
      return CpuSupports(CpuIsa::kX86_64_V3) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
    case CpuIsa::kX86_64_V3: return __builtin_cpu_supports("x86-64-v3");
    case CpuIsa::kX86_64_V4: return __builtin_cpu_supports("x86-64-v4");
#endif
  }
  return false;
}

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto: return "auto";
    case CpuIsa::kBaseline: return "baseline";
    case CpuIsa::kX86_64_V3: return "x86-64-v3";
    case CpuIsa::kX86_64_V4: return "x86-64-v4";
  }
  return "unknown";
}

CandidateSpec MakeCpuBlockedCandidate(const CpuBlockedOptions& options) {
  int threads = options.threads;
  if (threads <= 0) threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const CpuIsa isa = Resolve(options.isa);
  CandidateSpec spec;
  spec.name = "cpu_blocked";
  spec.version = kVersion;
  spec.tier = 2;
  spec.description = std::string("cache-blocked, packed, vectorized (") + CpuIsaName(isa) +
                     " micro-kernel), " + std::to_string(threads) + " threads";
  // Budgets. Measured at 64x64xK, K = 16..65536, N(0,1)*0.5 operands, 3 seeds,
  // each micro-kernel variant: max_rel_error/sqrt(K) raw, then net of the
  // u(dtype)*|ref| term the tolerance adds for rounding C. Sequential accumulation: the net figure is flat in K,
  // as a random walk of roundings predicts. Skipping the last 32 K values at
  // 8x8x65536 is caught while rel < 6.6e-5 (f32, f16; 6.0e-5 bf16).
  // f32: raw 4.2e-8, net 4.0e-8 (K=1024) with FMA (v3/v4); raw 4.4e-8, net
  // 4.2e-8 with the baseline's multiply-then-add -> rel 2e-7 (4.7x).
  spec.members.push_back(Member(DType::kF32, {.abs = 1e-6, .rel = 2e-7}, threads, isa));
  // f64: raw 5.2e-17, net 4.8e-17 (K=16) with FMA; 0 for the baseline (the
  // reference's own operations, in its order) -> rel 4e-16 (8x).
  spec.members.push_back(Member(DType::kF64, {.abs = 1e-14, .rel = 4e-16}, threads, isa));
  // f16: raw 8.8e-5 (K=16, storage rounding), net 9.2e-9 (K=65536). The f32
  // accumulation can err as much as in f32 before C is rounded, so the f32
  // figure sets it: rel 2e-7 (4.7x over 4.2e-8). abs covers f16 subnormal spacing.
  spec.members.push_back(Member(DType::kF16, {.abs = 1e-5, .rel = 2e-7}, threads, isa));
  // bf16: raw 5.8e-4 (K=16, storage rounding), net 2.4e-9 (K=65536); as f16.
  spec.members.push_back(Member(DType::kBF16, {.abs = 1e-5, .rel = 2e-7}, threads, isa));
  return spec;
}

}  // namespace arbiter
