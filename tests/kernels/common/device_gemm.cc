#include "tests/kernels/common/device_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "engine/dtype.h"
#include "engine/oracle.h"

namespace arbiter::kernels::testing {
namespace {

constexpr size_t kGuardBytes = 4096;

}  // namespace

void CheckCuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call, cudaGetErrorName(err),
               cudaGetErrorString(err));
  std::abort();
}

std::string MissingGpu(int min_cc) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    return std::string("no CUDA device visible (") + cudaGetErrorName(err) + ")";
  }
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, 0) != cudaSuccess) return "cannot read device 0";
  const int cc = props.major * 10 + props.minor;
  if (cc < min_cc) {
    return std::string(props.name) + " is sm_" + std::to_string(cc) + ", needs sm_" +
           std::to_string(min_cc) + "+";
  }
  return "";
}

int DeviceSmCount() {
  int device = 0, count = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

DeviceGemm::DeviceGemm(const Problem& p, uint64_t seed) : p_(p) {
  host_a_.resize(p.a_bytes());
  host_b_.resize(p.b_bytes());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t i = 0; i < p.m * p.k; ++i) StoreFromDouble(p.dtype, host_a_.data(), i, dist(rng));
  for (int64_t i = 0; i < p.k * p.n; ++i) StoreFromDouble(p.dtype, host_b_.data(), i, dist(rng));
  Upload();
}

DeviceGemm::DeviceGemm(const DeviceGemm& base, int64_t m) : p_(base.p_) {
  p_.m = m;
  host_a_.assign(base.host_a_.begin(), base.host_a_.begin() + p_.a_bytes());
  host_b_ = base.host_b_;
  Upload();
}

void DeviceGemm::Upload() {
  CUDA_OK(cudaMalloc(&a_, p_.a_bytes()));
  CUDA_OK(cudaMalloc(&b_, p_.b_bytes()));
  CUDA_OK(cudaMalloc(&c_, p_.c_bytes() + kGuardBytes));
  CUDA_OK(cudaMemcpy(a_, host_a_.data(), p_.a_bytes(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b_, host_b_.data(), p_.b_bytes(), cudaMemcpyHostToDevice));
  PoisonC();
}

DeviceGemm::~DeviceGemm() {
  cudaFree(a_);
  cudaFree(b_);
  cudaFree(c_);
  cudaFree(a_shifted_);
}

const void* DeviceGemm::misaligned_a() {
  if (a_shifted_ == nullptr) {
    CUDA_OK(cudaMalloc(&a_shifted_, p_.a_bytes() + 16));
    CUDA_OK(cudaMemcpy(static_cast<char*>(a_shifted_) + 2, host_a_.data(), p_.a_bytes(),
                       cudaMemcpyHostToDevice));
  }
  return static_cast<char*>(a_shifted_) + 2;
}

void DeviceGemm::PoisonC() {
  CUDA_OK(cudaMemset(c_, 0xff, p_.c_bytes() + kGuardBytes));
  CUDA_OK(cudaDeviceSynchronize());
}

std::vector<uint8_t> DeviceGemm::DownloadC() const {
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> out(p_.c_bytes());
  CUDA_OK(cudaMemcpy(out.data(), c_, p_.c_bytes(), cudaMemcpyDeviceToHost));
  return out;
}

std::vector<double> DeviceGemm::Reference() const {
  std::vector<double> a(p_.m * p_.k), b(p_.k * p_.n), c(p_.m * p_.n, 0.0);
  for (size_t i = 0; i < a.size(); ++i) a[i] = LoadAsDouble(p_.dtype, host_a_.data(), i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = LoadAsDouble(p_.dtype, host_b_.data(), i);
  for (int64_t i = 0; i < p_.m; ++i) {
    double* row = &c[i * p_.n];
    for (int64_t kk = 0; kk < p_.k; ++kk) {
      const double av = a[i * p_.k + kk];
      const double* brow = &b[kk * p_.n];
      for (int64_t j = 0; j < p_.n; ++j) row[j] += av * brow[j];
    }
  }
  return c;
}

::testing::AssertionResult DeviceGemm::Matches(const AccuracyBudget& budget) const {
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> guard(kGuardBytes);
  CUDA_OK(cudaMemcpy(guard.data(), static_cast<char*>(c_) + p_.c_bytes(), kGuardBytes,
                     cudaMemcpyDeviceToHost));
  const auto touched =
      std::find_if(guard.begin(), guard.end(), [](uint8_t v) { return v != 0xff; });
  if (touched != guard.end()) {
    return ::testing::AssertionFailure()
           << p_ << ": wrote past the end of C (guard byte " << (touched - guard.begin()) << ")";
  }
  const std::vector<uint8_t> c = DownloadC();
  const OracleReport report = CheckOutput(p_, budget, c.data(), Reference());
  if (!report.pass) return ::testing::AssertionFailure() << p_ << ": " << report.detail;
  return ::testing::AssertionSuccess() << p_ << ": " << report.detail;
}

LaunchArgs ArgsFor(const Problem& p, const void* a, const void* b, void* c, int sm_count) {
  LaunchArgs args;
  args.dtype = p.dtype;
  args.a = a;
  args.b = b;
  args.c = c;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.sm_count = sm_count;
  return args;
}

LaunchArgs DeviceGemm::Args(int sm_count) const { return ArgsFor(p_, a_, b_, c_, sm_count); }

}  // namespace arbiter::kernels::testing
