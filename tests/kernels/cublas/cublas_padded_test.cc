// cublas_padded (kernels/cublas/cublas_padded.h) and the pad kernel under it,
// on the device. Operands and C are allocated at their exact sizes
// (cudaMalloc, no pool slack), so a read or write past any of them shows under
// compute-sanitizer; C is poisoned with NaN before every run, so an element
// left unwritten fails. Shapes: ragged N, ragged K, both, odd M, f32 rows, a C
// that is not 16-byte aligned. Skips (saying so) without a GPU.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <ostream>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_resources.h"
#include "engine/candidate.h"
#include "engine/oracle.h"
#include "engine/random_fill.h"
#include "kernels/common/pad.h"
#include "kernels/cublas/cublas_candidates.h"

namespace arbiter::cublas {
namespace {

struct Env {
  std::unique_ptr<cuda::CudaBackend> backend;
  std::unique_ptr<Stream> stream;
  std::vector<CandidateSpec> candidates;
};

Env* Shared() {
  static Env* env = [] {
    auto* e = new Env;
    if (cuda::CudaBackend::VisibleDevices() == 0) return e;
    auto backend = cuda::CudaBackend::Create({});
    if (!backend.ok()) return e;
    auto stream = (*backend)->CreateStream();
    if (!stream.ok()) return e;
    e->backend = std::move(*backend);
    e->stream = std::move(*stream);
    e->candidates = MakeCublasCandidates();
    return e;
  }();
  return env;
}

#define SETUP_OR_SKIP(env)                                                  \
  Env* env = Shared();                                                      \
  if (cuda::CudaBackend::VisibleDevices() == 0) {                           \
    GTEST_SKIP() << "no CUDA device visible: GPU test skipped, not passed"; \
  }                                                                         \
  ASSERT_NE(env->stream, nullptr) << "a GPU is visible but the backend did not start"

// Device memory of exactly `bytes` (plus `offset` bytes before the pointer
// handed out, to misalign it); freed on destruction.
class Exact {
 public:
  Exact(size_t bytes, size_t offset = 0) : offset_(offset) {
    if (cudaMalloc(&base_, bytes + offset) != cudaSuccess) base_ = nullptr;
  }
  ~Exact() {
    if (base_ != nullptr) cudaFree(base_);
  }
  Exact(const Exact&) = delete;
  Exact& operator=(const Exact&) = delete;
  void* get() const { return base_ == nullptr ? nullptr : static_cast<char*>(base_) + offset_; }

 private:
  void* base_ = nullptr;
  size_t offset_;
};

struct Case {
  const char* kind;
  DType dtype;
  int64_t m, n, k;
  size_t c_offset;  // bytes C starts past a 256-byte boundary
};

const Case kCases[] = {
    {"ragged_n", DType::kF16, 65, 1001, 256, 0},
    {"ragged_n_even", DType::kBF16, 40, 30522, 72, 0},
    {"ragged_k", DType::kBF16, 64, 256, 1001, 0},
    {"ragged_both", DType::kBF16, 77, 333, 2049, 0},
    {"odd_m", DType::kF16, 129, 4095, 1023, 0},
    {"one", DType::kF16, 1, 1, 1, 0},
    {"f32", DType::kF32, 33, 1002, 250, 0},
    {"c_misaligned", DType::kF16, 31, 1001, 100, 2},
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.kind << " " << c.m << "x" << c.n << "x" << c.k << " " << DTypeName(c.dtype);
}

class CublasPaddedTest : public ::testing::TestWithParam<Case> {};

TEST_P(CublasPaddedTest, MatchesTheReferenceOnPoisonedExactC) {
  SETUP_OR_SKIP(env);
  const Case& c = GetParam();
  const Problem p{c.dtype, c.m, c.n, c.k};
  std::vector<unsigned char> a_host(p.a_bytes()), b_host(p.b_bytes());
  FillRandom(p.dtype, a_host.data(), p.m * p.k, 17 + c.m);
  FillRandom(p.dtype, b_host.data(), p.k * p.n, 29 + c.n);
  // The reference from the backend's buffers; the candidate runs on exact ones.
  auto ref_a = env->backend->Allocate(p.a_bytes());
  auto ref_b = env->backend->Allocate(p.b_bytes());
  ASSERT_TRUE(ref_a.ok() && ref_b.ok());
  ASSERT_TRUE(env->stream->CopyToDevice(**ref_a, a_host.data(), a_host.size()).ok());
  ASSERT_TRUE(env->stream->CopyToDevice(**ref_b, b_host.data(), b_host.size()).ok());
  std::vector<double> ref;
  ASSERT_TRUE(env->stream->Reference(p, **ref_a, **ref_b, &ref).ok());
  Exact a(p.a_bytes()), b(p.b_bytes()), out(p.c_bytes(), c.c_offset);
  ASSERT_NE(a.get(), nullptr);
  ASSERT_NE(b.get(), nullptr);
  ASSERT_NE(out.get(), nullptr);
  ASSERT_EQ(cudaMemcpy(a.get(), a_host.data(), a_host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b.get(), b_host.data(), b_host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const cudaStream_t s = cuda::Resources(env->stream.get()).stream;

  const CandidateSpec* spec = nullptr;
  for (const CandidateSpec& candidate : env->candidates) {
    if (candidate.name == "cublas_padded") spec = &candidate;
  }
  ASSERT_NE(spec, nullptr) << "cublas_padded is not registered";
  const CandidateMember* member = spec->Member(p.dtype);
  ASSERT_NE(member, nullptr);
  for (int run = 0; run < 2; ++run) {  // the second run reuses the stream's scratch
    ASSERT_EQ(cudaMemsetAsync(out.get(), 0xff, p.c_bytes(), s), cudaSuccess);  // NaN in every dtype
    const absl::Status status =
        member->run(GemmArgs{p, a.get(), b.get(), out.get(), env->stream.get()});
    ASSERT_TRUE(status.ok()) << "cublas_padded on " << p << ": " << status;
    std::vector<unsigned char> got(p.c_bytes());
    ASSERT_EQ(cudaMemcpyAsync(got.data(), out.get(), got.size(), cudaMemcpyDeviceToHost, s),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const OracleReport report = CheckOutput(p, member->contract.accuracy, got.data(), ref);
    std::printf("CHECK cublas_padded %-24s run %d %s max_abs=%.3g max_rel=%.3g nonfinite=%" PRId64
                "\n",
                p.ToString().c_str(), run, report.pass ? "PASS" : "FAIL", report.max_abs_error,
                report.max_rel_error, report.nonfinite);
    EXPECT_TRUE(report.pass) << "cublas_padded on " << p << " (" << c.kind
                             << "): " << report.detail << " (nonfinite " << report.nonfinite
                             << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CublasPaddedTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return absl::StrCat(c.kind, "_", c.m, "x", c.n, "x", c.k, "_",
                                               DTypeName(c.dtype));
                         });

// The pad kernel alone: three copies in one launch - 2-byte rows of odd width
// from a source 2 bytes off (every row misalignment, the element-before path
// and its first-element guard), a copy back to a ragged leading dim (a partial
// last chunk), and K-style zero rows - each against the host, exact sizes.
TEST(Pad2dBatchTest, ThreeCopiesInOneLaunchMatchTheHost) {
  SETUP_OR_SKIP(env);
  const cudaStream_t s = cuda::Resources(env->stream.get()).stream;
  struct Spec {
    int64_t src_rows, src_cols, src_ld, dst_rows, dst_cols;
    size_t src_offset;
  };
  const Spec specs[3] = {{37, 1001, 1001, 37, 1008, 2},   // A: ragged K, source 2 bytes off
                         {1001, 333, 333, 1008, 336, 0},  // B: ragged N, zero rows added
                         {37, 1001, 1008, 37, 1001, 0}};  // C back to its ragged leading dim
  std::vector<std::unique_ptr<Exact>> srcs, dsts;
  std::vector<std::vector<uint16_t>> src_host(3);
  kernels::Pad2dCopy copies[3];
  for (int j = 0; j < 3; ++j) {
    const Spec& sp = specs[j];
    const size_t src_elems = (sp.src_rows - 1) * sp.src_ld + sp.src_cols;  // exact: no tail past the last row
    src_host[j].resize(src_elems);
    for (size_t i = 0; i < src_elems; ++i) src_host[j][i] = static_cast<uint16_t>(i * 2654435761u >> 7 | 1);
    srcs.push_back(std::make_unique<Exact>(src_elems * 2, sp.src_offset));
    dsts.push_back(std::make_unique<Exact>(sp.dst_rows * sp.dst_cols * 2));
    ASSERT_EQ(cudaMemcpy(srcs[j]->get(), src_host[j].data(), src_elems * 2, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemset(dsts[j]->get(), 0xab, sp.dst_rows * sp.dst_cols * 2), cudaSuccess);
    copies[j] = {srcs[j]->get(), sp.src_rows, sp.src_cols, sp.src_ld, dsts[j]->get(), sp.dst_rows,
                 sp.dst_cols};
  }
  ASSERT_EQ(kernels::LaunchPad2dBatch(copies, 3, 2, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int j = 0; j < 3; ++j) {
    const Spec& sp = specs[j];
    std::vector<uint16_t> got(sp.dst_rows * sp.dst_cols);
    ASSERT_EQ(cudaMemcpy(got.data(), dsts[j]->get(), got.size() * 2, cudaMemcpyDeviceToHost),
              cudaSuccess);
    int64_t wrong = 0;
    for (int64_t r = 0; r < sp.dst_rows; ++r) {
      for (int64_t c = 0; c < sp.dst_cols; ++c) {
        const uint16_t want =
            r < sp.src_rows && c < sp.src_cols ? src_host[j][r * sp.src_ld + c] : uint16_t{0};
        wrong += got[r * sp.dst_cols + c] != want;
      }
    }
    EXPECT_EQ(wrong, 0) << "copy " << j;
  }
}

TEST(Pad2dBatchTest, RefusesWhatItCannotCopy) {
  kernels::Pad2dCopy copy{nullptr, 1, 1, 1, reinterpret_cast<void*>(16), 1, 1};
  EXPECT_EQ(kernels::LaunchPad2dBatch(&copy, 0, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::LaunchPad2dBatch(&copy, 4, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::LaunchPad2dBatch(&copy, 1, 8, nullptr), cudaErrorInvalidValue);
  copy.dst = reinterpret_cast<void*>(18);  // not 16-byte aligned
  EXPECT_EQ(kernels::LaunchPad2dBatch(&copy, 1, 2, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace arbiter::cublas
