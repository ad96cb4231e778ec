// planted_oob's launcher (test daemon only, planted.h): at M = kOutOfBoundsM it
// launches a kernel that writes far past C - an illegal address, a sticky error
// that ends the process's CUDA context; at every other shape it is simt, so it
// is correct and raced everywhere else.
#include <cstdint>

#include "kernels/common/launch_args.h"
#include "kernels/simt/simt.h"
#include "tests/integration/faults/planted.h"

namespace arbiter::testing {
namespace {

// 1 TiB past C: no allocation of this process is there.
constexpr uint64_t kPastC = uint64_t{1} << 40;

__global__ void WritePastC(char* c) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<float*>(c + kPastC) = 1.0f;
}

cudaError_t LaunchPlantedOob(const kernels::LaunchArgs& args, cudaStream_t stream) {
  if (args.m != kOutOfBoundsM) return kernels::kSimt.launch(args, stream);
  WritePastC<<<1, 32, 0, stream>>>(static_cast<char*>(args.c));
  return cudaGetLastError();
}

}  // namespace

extern const kernels::Launcher kPlantedOob = {"LaunchPlantedOob", LaunchPlantedOob};

}  // namespace arbiter::testing
