// Deliberately wrong candidates, planted so tests can show the engine catches
// them. Each claims an ordinary contract (f32, f64, f16, bf16; batch_invariant;
// arch "cpu"; the same budgets as cpu_blocked) that its output breaks:
//
//   planted_skip_k     a correct f64-accumulating triple loop that skips the
//                      last 32 values of K when K > 32, else the last one. Over
//                      budget at K = 65536 for f32 and f16 (the budgets are set
//                      so), and at any K for f32/f64 (tests pin 64x64x256).
//   planted_partial_c  correct, but writes only rows [0, M/2) of C: the rest
//                      keeps its NaN poison, so it fails at every M (M = 1
//                      writes nothing).
//   planted_gated      correct (the triple loop), but calls `before` first on
//                      every run, so a test decides when a kernel may proceed.
//
// Never register these in a daemon.
#pragma once

#include <functional>

#include "engine/candidate.h"

namespace arbiter::testing {

CandidateSpec MakePlantedSkipKCandidate();
CandidateSpec MakePlantedPartialCCandidate();
CandidateSpec MakePlantedGatedCandidate(std::function<void()> before);

// K values planted_skip_k leaves out: min(32, K) when K > 32, else 1.
int64_t PlantedSkippedK(int64_t k);

}  // namespace arbiter::testing
