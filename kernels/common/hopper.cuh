// What the Hopper (sm_90a) families share: mbarrier waits and arrivals, 2-D TMA
// loads completing on an mbarrier, thread-block cluster barriers and
// distributed shared memory, wgmma's shared-memory descriptors, fences and
// m64n128 / m64n256 MMAs, and the host-side tensor-map encoding (the driver's
// cuTensorMapEncodeTiled, reached through the runtime so libcuda is not
// linked). Device code only where compiled for sm_90; include from .cu files.
#pragma once

#include <cstdint>

#include <cuda.h>          // CUtensorMap and its enums (types only)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace arbiter::kernels::hopper {

// ---------------------------------------------------------------- device

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void BarrierInit(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void BarrierExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void BarrierArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Waits until the barrier phase with this parity has completed. A fresh
// barrier counts its (virtual) previous phase, parity 1, as completed.
__device__ __forceinline__ void BarrierWait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

// 2-D TMA tile load; coordinates are (inner, outer) elements and may run past
// the tensor, where TMA fills zeros (and still counts the full box bytes).
__device__ __forceinline__ void TmaLoad2d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                          int inner, int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(inner), "r"(outer)
      : "memory");
}

// The address of `addr` (this CTA's shared memory) in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t MapRank(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}

__device__ __forceinline__ float4 LoadCluster4(uint32_t remote) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

// Every thread of every CTA of the cluster (release, then acquire: shared
// memory written before is visible to the other CTAs after).
__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" :::
                   "memory");
}

// Shared-memory matrix descriptor, 128B swizzle. Addresses and offsets are in
// bytes (encoded in 16-byte units). K-major operand: SBO = 1024 between 8-row
// groups, LBO unused. MN-major operand: LBO = distance between 64-element
// swizzle atoms along M or N, SBO = 1024 between groups of 8 k-rows.
__device__ __forceinline__ uint64_t SmemDesc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>(lbo >> 4) << 16) | (static_cast<uint64_t>(sbo >> 4) << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving accumulator reads across a wgmma wait.
template <int kCount>
__device__ __forceinline__ void FenceAccumulators(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma m64nNk16 with f32 accumulators in registers (the warpgroup's 64 x N
// tile of D, N / 2 floats a thread), operands from shared-memory descriptors.
#define WGMMA_ACC8(i)                                                                 \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])

#define WGMMA_REGS_64                                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "             \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "    \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "    \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

#define WGMMA_REGS_128                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                   \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "          \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "          \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "          \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "          \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "          \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "     \
  "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, " \
  "%126, %127}"

// D(64 x N, f32) += A(64 x 16, K-major) * B(16 x N, MN-major: trans-b = 1).
// scale_d = 0 overwrites D instead (the first k step of a tile).
template <bool kBf16>
__device__ __forceinline__ void Mma64x256(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                          uint32_t scale_d) {
  if constexpr (kBf16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WGMMA_REGS_128
        ", %128, %129, p, 1, 1, 0, 1;\n}\n"
        : WGMMA_ACC8(0), WGMMA_ACC8(8), WGMMA_ACC8(16), WGMMA_ACC8(24), WGMMA_ACC8(32),
          WGMMA_ACC8(40), WGMMA_ACC8(48), WGMMA_ACC8(56), WGMMA_ACC8(64), WGMMA_ACC8(72),
          WGMMA_ACC8(80), WGMMA_ACC8(88), WGMMA_ACC8(96), WGMMA_ACC8(104), WGMMA_ACC8(112),
          WGMMA_ACC8(120)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " WGMMA_REGS_128
        ", %128, %129, p, 1, 1, 0, 1;\n}\n"
        : WGMMA_ACC8(0), WGMMA_ACC8(8), WGMMA_ACC8(16), WGMMA_ACC8(24), WGMMA_ACC8(32),
          WGMMA_ACC8(40), WGMMA_ACC8(48), WGMMA_ACC8(56), WGMMA_ACC8(64), WGMMA_ACC8(72),
          WGMMA_ACC8(80), WGMMA_ACC8(88), WGMMA_ACC8(96), WGMMA_ACC8(104), WGMMA_ACC8(112),
          WGMMA_ACC8(120)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
}

template <bool kBf16>
__device__ __forceinline__ void Mma64x128(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                          uint32_t scale_d) {
  if constexpr (kBf16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_REGS_64
        ", %64, %65, p, 1, 1, 0, 1;\n}\n"
        : WGMMA_ACC8(0), WGMMA_ACC8(8), WGMMA_ACC8(16), WGMMA_ACC8(24), WGMMA_ACC8(32),
          WGMMA_ACC8(40), WGMMA_ACC8(48), WGMMA_ACC8(56)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " WGMMA_REGS_64
        ", %64, %65, p, 1, 1, 0, 1;\n}\n"
        : WGMMA_ACC8(0), WGMMA_ACC8(8), WGMMA_ACC8(16), WGMMA_ACC8(24), WGMMA_ACC8(32),
          WGMMA_ACC8(40), WGMMA_ACC8(48), WGMMA_ACC8(56)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
}

// Two f32 rounded to the dtype, packed low element first.
template <bool kBf16>
__device__ __forceinline__ uint32_t PackPair(float x, float y) {
  if constexpr (kBf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// ---------------------------------------------------------------- host

// The driver's cuTensorMapEncodeTiled, or nullptr where the driver has none.
inline PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A row-major [outer, inner] tensor of 16-bit elements (bf16 or f16) whose
// rows lie `row_bytes` apart (a multiple of 16, data 16-byte aligned: what TMA
// takes), read or written in boxes of box_outer x box_inner, 128B swizzle.
// Elements past the tensor read as zeros and are never written.
inline cudaError_t EncodeTensorMap16Strided(CUtensorMap* map, bool bf16, const void* data,
                                            int64_t inner, int64_t outer, int64_t row_bytes,
                                            uint32_t box_inner, uint32_t box_outer) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = TensorMapEncoder();
  if (encode == nullptr) return cudaErrorSymbolNotFound;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};  // bytes, dim 1
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(
      map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
      const_cast<void*>(data), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// A dense row-major [outer, inner] tensor of 16-bit elements (rows inner * 2 bytes apart).
inline cudaError_t EncodeTensorMap16(CUtensorMap* map, bool bf16, const void* data, int64_t inner,
                                     int64_t outer, uint32_t box_inner, uint32_t box_outer) {
  return EncodeTensorMap16Strided(map, bf16, data, inner, outer, inner * 2, box_inner, box_outer);
}

}  // namespace arbiter::kernels::hopper
