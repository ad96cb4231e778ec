#include "backends/cuda/cuda_candidates.h"

#include <utility>

#include "kernels/cublas/cublas_candidates.h"

// Each family is compiled in only when its CMake target exists (see CMakeLists.txt).
#ifdef ARBITER_HAVE_MMA_WARP
#include "kernels/mma_warp/mma_warp_candidate.h"
#endif
#ifdef ARBITER_HAVE_MMA_TILED
#include "kernels/mma_tiled/mma_tiled_candidate.h"
#endif
#ifdef ARBITER_HAVE_SPLITK
#include "kernels/splitk/splitk_candidate.h"
#endif
#ifdef ARBITER_HAVE_GEMV
#include "kernels/gemv/gemv_candidate.h"
#endif
#ifdef ARBITER_HAVE_SIMT
#include "kernels/simt/simt_candidate.h"
#endif
#ifdef ARBITER_HAVE_WGMMA
#include "kernels/wgmma/wgmma_candidate.h"
#endif

namespace arbiter::cuda {
namespace {

void Add(std::vector<CandidateSpec>& out, CandidateSpec spec) { out.push_back(std::move(spec)); }
void Add(std::vector<CandidateSpec>& out, std::vector<CandidateSpec> specs) {
  for (CandidateSpec& s : specs) out.push_back(std::move(s));
}

}  // namespace

std::vector<CandidateSpec> CudaCandidates(CudaBackend& backend) {
  (void)backend;  // every family is listed; the registry checks each claim against the device
  std::vector<CandidateSpec> out;
  Add(out, cublas::MakeCublasCandidates());
#ifdef ARBITER_HAVE_MMA_WARP
  Add(out, MakeMmaWarpCandidate());
#endif
#ifdef ARBITER_HAVE_MMA_TILED
  Add(out, MakeMmaTiledCandidate());
#endif
#ifdef ARBITER_HAVE_SPLITK
  Add(out, MakeSplitkCandidate());
#endif
#ifdef ARBITER_HAVE_GEMV
  Add(out, MakeGemvCandidate());
#endif
#ifdef ARBITER_HAVE_SIMT
  Add(out, MakeSimtCandidate());
#endif
#ifdef ARBITER_HAVE_WGMMA
  Add(out, MakeWgmmaCandidates());
#endif
  return out;
}

}  // namespace arbiter::cuda
