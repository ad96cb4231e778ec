// transformer_bench's candidates (candidates.h): the runners - cuBLAS and
// cuBLASLt as the daemon calls them, the padded cuBLAS paths, each kernel
// family through its launcher - and Candidates(), which lists them with their
// budgets and coverage.
#include "bench/transformer/candidates.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/kernels/gemm_check.cuh"
#include "kernels/common/pad.h"
#include "kernels/gemv/gemv.h"
#include "kernels/mid_stream/mid_stream.h"
#include "kernels/skinny/skinny_stream.h"
#include "kernels/splitk/splitk.h"
#include "kernels/splitk_tiny/splitk_tiny.h"
#include "kernels/wgmma/wgmma_gemm.h"
#include "kernels/wgmma_bt/wgmma_bt.h"
#include "kernels/wgmma_ragged/wgmma_ragged.h"

namespace arbiter::transformer_bench {

Context g;

namespace {

void* Workspace(size_t bytes) { return g.workspace.Get(bytes); }

void GemmEx(DType dtype, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
            const void* b, int64_t ldb, void* c, int64_t ldc, cudaStream_t s) {
  gc::RowMajorGemmEx(g.cublas, dtype, m, n, k, a, lda, b, ldb, c, ldc, s);
}

void Cublas(const Op& op, cudaStream_t s) { gc::RowMajorGemmEx(g.cublas, op, s); }

int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }
size_t RoundUpBytes(size_t v) { return (v + 255) / 256 * 256; }

// kernels/cublas/cublas_padded.cc v1 (a80ed62): 2-D memcpy into scratch with
// leading dims rounded up to 8, memset of the pad, cuBLAS, 2-D copy of C back.
void PaddedMemcpy2D(const Op& op, cudaStream_t s) {
  const int64_t kp = RoundUp(op.k, 8), np = RoundUp(op.n, 8);
  if (kp == op.k && np == op.n) return Cublas(op, s);
  const size_t es = 2;
  const bool pad_a = kp != op.k, pad_c = np != op.n;
  const size_t a_bytes = pad_a ? RoundUpBytes(op.m * kp * es) : 0;
  const size_t b_bytes = RoundUpBytes(kp * np * es);
  const size_t c_bytes = pad_c ? RoundUpBytes(op.m * np * es) : 0;
  char* a_pad = static_cast<char*>(Workspace(a_bytes + b_bytes + c_bytes));
  char* b_pad = a_pad + a_bytes;
  char* c_pad = b_pad + b_bytes;
  const void* a = op.a;
  if (pad_a) {
    CUDA_CHECK(cudaMemcpy2DAsync(a_pad, kp * es, op.a, op.k * es, op.k * es, op.m,
                                 cudaMemcpyDeviceToDevice, s));
    CUDA_CHECK(cudaMemset2DAsync(a_pad + op.k * es, kp * es, 0, (kp - op.k) * es, op.m, s));
    a = a_pad;
  }
  CUDA_CHECK(cudaMemcpy2DAsync(b_pad, np * es, op.b, op.n * es, op.n * es, op.k,
                               cudaMemcpyDeviceToDevice, s));
  if (np != op.n) {
    CUDA_CHECK(cudaMemset2DAsync(b_pad + op.n * es, np * es, 0, (np - op.n) * es, op.k, s));
  }
  if (kp != op.k) CUDA_CHECK(cudaMemsetAsync(b_pad + op.k * np * es, 0, (kp - op.k) * np * es, s));
  void* c = pad_c ? static_cast<void*>(c_pad) : op.c;
  GemmEx(op.dtype, op.m, np, kp, a, kp, b_pad, np, c, np, s);
  if (pad_c) {
    CUDA_CHECK(cudaMemcpy2DAsync(op.c, op.n * es, c_pad, np * es, op.n * es, op.m,
                                 cudaMemcpyDeviceToDevice, s));
  }
}

// kernels/cublas/cublas_padded.cc v3 (PaddedGemm, with kernels/cublas/padded_plan.h
// for 2-byte elements): A (ragged K) to M x Kp and B to Kp x Np in one launch
// (k::LaunchPad2dBatch), cuBLAS into M x Np, C's M x N copied back.
void PaddedKernel(const Op& op, cudaStream_t s) {
  const int64_t kp = RoundUp(op.k, 8), np = RoundUp(op.n, 8);
  if (kp == op.k && np == op.n) return Cublas(op, s);
  const bool pad_a = kp != op.k, pad_c = np != op.n;
  const size_t a_bytes = pad_a ? RoundUpBytes(op.m * kp * 2) : 0;
  const size_t b_bytes = RoundUpBytes(kp * np * 2);
  const size_t c_bytes = pad_c ? RoundUpBytes(op.m * np * 2) : 0;
  char* a_pad = static_cast<char*>(Workspace(a_bytes + b_bytes + c_bytes));
  char* b_pad = a_pad + a_bytes;
  char* c_pad = b_pad + b_bytes;
  k::Pad2dCopy copies[2];
  int count = 0;
  if (pad_a) copies[count++] = {op.a, op.m, op.k, op.k, a_pad, op.m, kp};
  copies[count++] = {op.b, op.k, op.n, op.n, b_pad, kp, np};
  CUDA_CHECK(k::LaunchPad2dBatch(copies, count, 2, s));
  void* c = pad_c ? static_cast<void*>(c_pad) : op.c;
  GemmEx(op.dtype, op.m, np, kp, pad_a ? a_pad : op.a, pad_a ? kp : op.k, b_pad, np, c, np, s);
  if (pad_c) CUDA_CHECK(k::LaunchPad2d(c_pad, op.m, op.n, np, op.c, op.m, op.n, 2, s));
}

// An experiment: pad A and B only and let cuBLAS write C at its own ragged
// leading dim (N columns of the padded product: the pad columns are never
// computed into C).
void PaddedAB(const Op& op, cudaStream_t s) {
  const int64_t kp = RoundUp(op.k, 8), np = RoundUp(op.n, 8);
  if (kp == op.k && np == op.n) return Cublas(op, s);
  const bool pad_a = kp != op.k;
  const size_t a_bytes = pad_a ? RoundUpBytes(op.m * kp * 2) : 0;
  const size_t b_bytes = RoundUpBytes(kp * np * 2);
  char* a_pad = static_cast<char*>(Workspace(a_bytes + b_bytes));
  char* b_pad = a_pad + a_bytes;
  const void* a = op.a;
  if (pad_a) {
    CUDA_CHECK(k::LaunchPad2d(op.a, op.m, op.k, op.k, a_pad, op.m, kp, 2, s));
    a = a_pad;
  }
  CUDA_CHECK(k::LaunchPad2d(op.b, op.k, op.n, op.n, b_pad, kp, np, 2, s));
  GemmEx(op.dtype, op.m, op.n, kp, a, kp, b_pad, np, op.c, op.n, s);
}

// cuBLASLt's heuristic ranks for one problem, as kernels/cublas/cublaslt_gemm.cc asks.
struct LtPlan {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos;
};
std::map<std::string, LtPlan> g_lt;

LtPlan& LtFor(const Op& op) {
  char key[128];
  std::snprintf(key, sizeof key, "%d %ld %ld %ld", static_cast<int>(op.dtype),
                static_cast<long>(op.m), static_cast<long>(op.n), static_cast<long>(op.k));
  auto it = g_lt.find(key);
  if (it != g_lt.end()) return it->second;
  LtPlan& p = g_lt[key];
  const cudaDataType_t t = gc::CudaType(op.dtype);
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, t, op.n, op.k, op.n));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, t, op.k, op.m, op.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, t, op.n, op.m, op.n));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &g.lt_workspace_bytes,
                                                    sizeof(g.lt_workspace_bytes)));
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof(reduction)));
  const uintptr_t bits = reinterpret_cast<uintptr_t>(op.a) | reinterpret_cast<uintptr_t>(op.b) |
                         reinterpret_cast<uintptr_t>(op.c) | 256;
  const uint32_t align = static_cast<uint32_t>(bits & (~bits + 1));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(g.lt_ranks));
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(g.lt, p.matmul, p.a, p.b, p.c, p.c, pref,
                                              g.lt_ranks, results.data(), &found));
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    uint32_t scheme = 0;
    size_t written = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(
        &results[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme),
        &written));
    if (scheme != CUBLASLT_REDUCTION_SCHEME_NONE &&
        scheme != CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) {
      continue;
    }
    p.algos.push_back(results[i].algo);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  return p;
}

void CublasLt(const Op& op, int rank, cudaStream_t s) {
  LtPlan& p = LtFor(op);
  const float alpha = 1.f, beta = 0.f;
  CUBLAS_CHECK(cublasLtMatmul(g.lt, p.matmul, &alpha, op.b, p.a, op.a, p.b, &beta, op.c, p.c,
                              op.c, p.c, &p.algos[rank], g.lt_workspace, g.lt_workspace_bytes, s));
}

// A family through its Launcher (kernels/common/launch_args.h), with the scratch it asks for.
void RunFamily(const k::Launcher& launcher, const Op& op, cudaStream_t s) {
  gc::RunFamily(launcher, op, g.sm_count, g.workspace, s);
}

void Skinny(const Op& op, cudaStream_t s) { RunFamily(k::kSkinnyStream, op, s); }
void Gemv(const Op& op, cudaStream_t s) { RunFamily(k::kGemv, op, s); }
void SplitK(const Op& op, cudaStream_t s) { RunFamily(k::kSplitK, op, s); }
void SplitKTiny(const Op& op, cudaStream_t s) { RunFamily(k::kSplitKTiny, op, s); }
void SkinnyWide(const Op& op, cudaStream_t s) { RunFamily(k::kSkinnyStreamWideLauncher, op, s); }
void SkinnyRagged(const Op& op, cudaStream_t s) {
  RunFamily(k::kSkinnyStreamRaggedLauncher, op, s);
}
void WgmmaRagged(const Op& op, cudaStream_t s) { RunFamily(k::kWgmmaRagged, op, s); }

// mid_stream with one of its configs (kernels/mid_stream/mid_stream.h).
void MidStream(const Op& op, const k::MidStreamConfig& config, cudaStream_t s) {
  k::LaunchArgs args = gc::Args(op.dtype, op.a, op.b, op.c, op.m, op.n, op.k, g.sm_count);
  args.workspace_bytes = k::MidStreamWorkspaceBytes(args, config);
  args.workspace = Workspace(args.workspace_bytes);
  CUDA_CHECK(k::LaunchMidStream(args, config, s));
}

// wgmma_bt with `splits` CTAs per strip (0: its own plan).
void WgmmaBt(const Op& op, int splits, cudaStream_t s) {
  const k::LaunchArgs args = gc::Args(op.dtype, op.a, op.b, op.c, op.m, op.n, op.k, g.sm_count);
  CUDA_CHECK(k::LaunchWgmmaBt(args, s, splits));
}

void Wgmma(const Op& op, arbiter::wgmma::WgmmaTile tile, cudaStream_t s) {
  arbiter::wgmma::WgmmaGemmArgs args;
  args.dtype = op.dtype == DType::kBF16 ? arbiter::wgmma::WgmmaDType::kBF16
                                        : arbiter::wgmma::WgmmaDType::kF16;
  args.tile = tile;
  args.m = op.m;
  args.n = op.n;
  args.k = op.k;
  args.a = op.a;
  args.b = op.b;
  args.c = op.c;
  args.num_sms = g.sm_count;
  args.workspace_bytes = arbiter::wgmma::WgmmaWorkspaceBytes(args);  // stream-K partials
  args.workspace = Workspace(args.workspace_bytes);
  CUDA_CHECK(arbiter::wgmma::LaunchWgmmaGemm(args, s));
}

}  // namespace

std::vector<Candidate> Candidates() {
  const auto any = [](const Op&) { return true; };
  const auto aligned = [](const Op& op) { return op.n % 8 == 0 && op.k % 8 == 0; };
  std::vector<Candidate> out;
  out.push_back({"cublas", 1e-4, 5e-6, any, Cublas});
  for (int rank = 0; rank < std::max(g.lt_ranks, kLtRacedRanks); ++rank) {
    out.push_back({"cublaslt_h" + std::to_string(rank), 1e-4, 5e-6,
                   [rank](const Op& op) { return rank < static_cast<int>(LtFor(op).algos.size()); },
                   [rank](const Op& op, cudaStream_t s) { CublasLt(op, rank, s); },
                   rank < kLtRacedRanks});
  }
  const auto ragged = [](const Op& op) { return op.n % 8 != 0 || op.k % 8 != 0; };
  out.push_back({"cublas_padded", 1e-4, 5e-6, ragged, PaddedKernel});
  // Bench only: the padded path before v3, to compare in one run.
  out.push_back({"cublas_padded_v1", 1e-4, 5e-6, ragged, PaddedMemcpy2D, false});
  out.push_back({"cublas_padded_ab", 1e-4, 5e-6, ragged, PaddedAB, false});
  out.push_back({"wgmma_128x128", 1e-6, 1e-5, aligned, [](const Op& op, cudaStream_t s) {
                   Wgmma(op, arbiter::wgmma::WgmmaTile::k128x128, s);
                 }});
  out.push_back({"wgmma_128x256", 1e-6, 1e-5, aligned, [](const Op& op, cudaStream_t s) {
                   Wgmma(op, arbiter::wgmma::WgmmaTile::k128x256, s);
                 }});
  out.push_back({"wgmma_64x256_splitk", 1e-6, 1e-5,
                 [aligned](const Op& op) { return aligned(op) && op.m <= 1024; },
                 [](const Op& op, cudaStream_t s) {
                   Wgmma(op, arbiter::wgmma::WgmmaTile::k64x256SplitK, s);
                 }});
  // Bench only (kernels/wgmma/wgmma_candidate.cc says why they are not raced),
  // at any M, so the tables show them beside the data-parallel tiles on large
  // shapes too (1.4-1.8x slower there on the H200: bench/results/wgmma-h200.md).
  for (const auto tile : {arbiter::wgmma::WgmmaTile::k64x256StreamK,
                          arbiter::wgmma::WgmmaTile::k128x256StreamK,
                          arbiter::wgmma::WgmmaTile::k128x128StreamK}) {
    out.push_back({std::string("wgmma_") + arbiter::wgmma::WgmmaTileName(tile), 1e-6, 1e-5,
                   aligned, [tile](const Op& op, cudaStream_t s) { Wgmma(op, tile, s); }, false});
  }
  const auto even_n = [](const Op& op) { return op.n % 8 != 0 && op.n % 2 == 0 && op.k % 8 == 0; };
  out.push_back({"wgmma_128x128_cpasync", 1e-6, 1e-5, even_n,
                 [](const Op& op, cudaStream_t s) {
                   Wgmma(op, arbiter::wgmma::WgmmaTile::k128x128CpAsync, s);
                 },
                 false});
  out.push_back({"wgmma_128x256_cpasync", 1e-6, 1e-5, even_n,
                 [](const Op& op, cudaStream_t s) {
                   Wgmma(op, arbiter::wgmma::WgmmaTile::k128x256CpAsync, s);
                 },
                 false});
  // The coverage kernels/wgmma_ragged/wgmma_ragged_candidate.cc registers: N
  // not a multiple of 8 (what cublas_padded copies for), K % 8 == 0.
  out.push_back({"wgmma_ragged", k::kWgmmaRaggedBudgetAbs, k::kWgmmaRaggedBudgetRel,
                 [](const Op& op) { return op.n % 8 != 0 && op.k % 8 == 0; }, WgmmaRagged});
  out.push_back({"splitk", k::kSplitKBudgetAbs, k::kSplitKBudgetRel,
                 [](const Op& op) { return op.m * op.n <= 1 << 20; }, SplitK});
  // The coverage kernels/splitk_tiny/splitk_tiny_candidate.cc registers.
  out.push_back({"splitk_tiny", k::kSplitKTinyBudgetAbs, k::kSplitKTinyBudgetRel,
                 [](const Op& op) {
                   return op.m <= k::kSplitKTinyRacedMaxM && op.n <= k::kSplitKTinyRacedMaxN &&
                          op.k >= k::kSplitKTinyRacedMinK && op.k % k::kSplitKTinyAlignK == 0;
                 },
                 SplitKTiny});
  out.push_back({"gemv", k::kGemvBudgetAbs, k::kGemvBudgetRel,
                 [](const Op& op) { return op.m <= k::kGemvMaxM; }, Gemv});
  // The coverage kernels/skinny/skinny_candidate.cc registers.
  out.push_back({"skinny", k::kSkinnyStreamBudgetAbs, k::kSkinnyStreamBudgetRel,
                 [](const Op& op) {
                   return op.m <= k::kSkinnyStreamRacedMaxM &&
                          op.n % k::kSkinnyStreamRacedAlignN == 0;
                 },
                 Skinny});
  out.push_back({"skinny_wide", k::kSkinnyStreamBudgetAbs, k::kSkinnyStreamBudgetRel,
                 [](const Op& op) {
                   return op.m >= k::kSkinnyStreamWideRacedMinM &&
                          op.m <= k::kSkinnyStreamWideRacedMaxM &&
                          op.n % k::kSkinnyStreamWideRacedAlignN == 0;
                 },
                 SkinnyWide});
  // The span config at the coverage MakeSkinnyRaggedCandidate registers (its
  // launcher declines N % 8 == 0).
  out.push_back({"skinny_ragged", k::kSkinnyStreamBudgetAbs, k::kSkinnyStreamBudgetRel,
                 [](const Op& op) {
                   return op.m <= k::kSkinnyStreamRaggedMaxM && op.n % 8 != 0;
                 },
                 SkinnyRagged});
  // mid_stream at the coverage kernels/mid_stream/mid_stream_candidate.cc
  // declares (its default config, "mid_stream"), and its other configs. Bench
  // only: correct on the H200 but slower than cuBLAS at every shape measured
  // (bench/results/mid-stream-h200.md), so not registered.
  for (const k::MidStreamConfig& config : k::kMidStreamConfigs) {
    const bool is_default = config.columns == k::kMidStreamDefault.columns &&
                            config.token_split == k::kMidStreamDefault.token_split;
    out.push_back({is_default ? std::string("mid_stream") : std::string("mid_stream_") + config.name,
                   k::kMidStreamBudgetAbs, k::kMidStreamBudgetRel,
                   [aligned, config](const Op& op) {
                     return aligned(op) && op.m >= k::kMidStreamRacedMinM &&
                            op.m <= (config.columns == 512 ? 64 : k::kMidStreamRacedMaxM);
                   },
                   [config](const Op& op, cudaStream_t s) { MidStream(op, config, s); }, false});
  }
  // wgmma_bt at the coverage kernels/wgmma_bt/wgmma_bt_candidate.cc declares,
  // and the same kernel with 1, 2, 4 and 8 CTAs per strip, to see what the
  // plan's split count buys. Bench only: correct on the H200 but never faster
  // than what is served there (bench/results/wgmma-bt-h200.md), so not registered.
  const auto bt_covers = [aligned](const Op& op) {
    return aligned(op) && op.m >= k::kWgmmaBtRacedMinM && op.m <= k::kWgmmaBtRacedMaxM;
  };
  out.push_back({"wgmma_bt", k::kWgmmaBtBudgetAbs, k::kWgmmaBtBudgetRel, bt_covers,
                 [](const Op& op, cudaStream_t s) { WgmmaBt(op, 0, s); }, false});
  for (int splits : {1, 2, 4, 8}) {
    out.push_back({"wgmma_bt_s" + std::to_string(splits), k::kWgmmaBtBudgetAbs, k::kWgmmaBtBudgetRel,
                   bt_covers, [splits](const Op& op, cudaStream_t s) { WgmmaBt(op, splits, s); },
                   false});
  }
  return out;
}

}  // namespace arbiter::transformer_bench
