#include "kernels/registry/cuda_candidates.h"

#include <utility>

#include "kernels/cublas/cublas_candidates.h"
#include "kernels/gemv/gemv_candidate.h"
#include "kernels/mma_tiled/mma_tiled_candidate.h"
#include "kernels/mma_warp/mma_warp_candidate.h"
#include "kernels/simt/simt_candidate.h"
#include "kernels/skinny/skinny_candidate.h"
#include "kernels/splitk/splitk_candidate.h"
#include "kernels/splitk_tiny/splitk_tiny_candidate.h"
#include "kernels/wgmma/wgmma_candidate.h"
#include "kernels/wgmma_ragged/wgmma_ragged_candidate.h"

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
  Add(out, kernels::MakeMmaWarpCandidate());
  Add(out, kernels::MakeMmaTiledCandidate());
  Add(out, kernels::MakeSplitkCandidate());
  // M, N <= 16 against K >= 32768: one launch where splitk takes two
  // (kernels/splitk_tiny/splitk_tiny.h says why no wider).
  Add(out, kernels::MakeSplitKTinyCandidate());
  Add(out, kernels::MakeGemvCandidate());
  Add(out, kernels::MakeSimtCandidate());
  Add(out, MakeWgmmaCandidates());
  // N not a multiple of 8 with no padded copies (kernels/wgmma_ragged/wgmma_ragged.h);
  // cublas_padded races it there.
  Add(out, kernels::MakeWgmmaRaggedCandidate());
  // skinny_stream at M <= 8, its wide config at 9-16 rows, and its span
  // config at 1-16 rows of a ragged N (kernels/skinny/skinny_stream.h says why).
  Add(out, kernels::MakeSkinnyCandidate());
  Add(out, kernels::MakeSkinnyWideCandidate());
  Add(out, kernels::MakeSkinnyRaggedCandidate());
  return out;
}

}  // namespace arbiter::cuda
