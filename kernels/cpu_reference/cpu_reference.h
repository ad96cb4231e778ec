// cpu_reference: C = A*B by the naive loop, accumulating each element in f64
// over k = 0..K-1 in order on the calling thread, rounding to the dtype once on
// store. Slow; it exists so every dtype has a candidate whose only error is the
// final rounding, and as the floor the tuned candidates must beat.
#pragma once

#include "engine/candidate.h"

namespace arbiter {

// Members f32, f64, f16, bf16; batch_invariant; arch "cpu"; any shape.
CandidateSpec MakeCpuReferenceCandidate();

}  // namespace arbiter
