// tma_probe: which start of a 2-D TMA box the H200 accepts. One case per
// process (a TMA fault is sticky for the context): a bf16 tensor of 64 rows x
// 1024 columns whose map starts `base_bytes` past a 256-byte boundary, read as
// one 64 x 8 box (128B swizzle, as wgmma_ragged loads B) at column x. Prints
// "ok", "wrong" (data not where expected) or the CUDA error. wgmma_ragged's
// first device run faulted (illegal instruction) on its first box whose
// global start was not 16-byte aligned (x = n0 + s_r); this tells whether the
// rule is the box start (x * 2 % 16) or the map's base alignment.
//   usage: tma_probe BASE_BYTES X   (bench/tma_probe/device_run.sh runs the cases)
// Bench tool: errors exit on the spot.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/common/hopper.cuh"

namespace {

using namespace arbiter::kernels::hopper;

__global__ void ProbeKernel(const __grid_constant__ CUtensorMap map, int x, uint16_t* out) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t box = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  __shared__ uint64_t bar_storage;
  const uint32_t bar = SmemAddr(&bar_storage);
  if (threadIdx.x == 0) {
    BarrierInit(bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    BarrierExpectTx(bar, 1024);
    TmaLoad2d(box, &map, bar, x, 0);
    BarrierWait(bar, 0);
    // Undo the 128B swizzle: row r's 16-byte chunk c sits at chunk c ^ r.
    const uint8_t* s = smem_raw + (box - SmemAddr(smem_raw));
    for (int r = 0; r < 8; ++r) {
      for (int c = 0; c < 64; ++c) {
        const int at = r * 128 + (((c / 8) ^ r) * 16) + (c % 8) * 2;
        out[r * 64 + c] = *reinterpret_cast<const uint16_t*>(s + at);
      }
    }
  }
}

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::printf("%s: %s\n", what, cudaGetErrorName(err));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BASE_BYTES X\n", argv[0]);
    return 2;
  }
  const int base_bytes = std::atoi(argv[1]);
  const int x = std::atoi(argv[2]);
  constexpr int kRows = 64, kCols = 1024;
  std::vector<uint16_t> host(kRows * kCols + 256);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint16_t>(i * 7 + 1);
  uint8_t* dev = nullptr;
  Check(cudaMalloc(&dev, host.size() * 2), "cudaMalloc");
  Check(cudaMemcpy(dev, host.data(), host.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  CUtensorMap map;
  const void* base = dev + base_bytes;
  Check(EncodeTensorMap16Strided(&map, true, base, kCols, kRows, kCols * 2, 64, 8), "encode");
  uint16_t* out = nullptr;
  Check(cudaMalloc(&out, 8 * 64 * 2), "cudaMalloc");
  ProbeKernel<<<1, 32, 2048>>>(map, x, out);
  Check(cudaGetLastError(), "launch");
  Check(cudaDeviceSynchronize(), "kernel");
  std::vector<uint16_t> got(8 * 64);
  Check(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  const size_t first = static_cast<size_t>(base_bytes / 2);
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 64; ++c) {
      const int col = x + c;  // columns outside the tensor read as zeros
      const uint16_t want = col >= 0 && col < kCols ? host[first + r * kCols + col] : 0;
      if (got[r * 64 + c] != want) {
        std::printf("base %d x %d: wrong at row %d col %d (%u, want %u)\n", base_bytes, x, r, c,
                    got[r * 64 + c], want);
        return 1;
      }
    }
  }
  std::printf("base %d x %d: ok\n", base_bytes, x);
  return 0;
}
