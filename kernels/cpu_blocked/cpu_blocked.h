// cpu_blocked: a cache-blocked GEMM. B panels (KC x NC) and A panels (MC x KC)
// are packed - f16/bf16 widened to f32 on the way - into micro-panels a 6 x W
// register tile walks (W = 64 bytes of the compute type); the micro-kernel is
// written with GCC vector extensions and built for x86-64-v4, -v3 and baseline
// (target attributes, picked once per process by __builtin_cpu_supports), so
// the binary runs on any x86-64.
//
// Determinism: each C element is one accumulator that starts at zero and adds
// a[i,k]*b[k,j] for k = 0..K-1 in order, kept exactly (in the compute type)
// between K blocks; every element, edge or not, goes through the same full-tile
// micro-kernel on zero-padded panels. So the bits depend on neither M, N, the
// thread count nor the blocking: batch_invariant.
//
// Threading: (MC x NC) blocks of C are handed out to `threads` threads, joined
// before the kernel returns. Thread-safe: concurrent calls share nothing.
#pragma once

#include "engine/candidate.h"

namespace arbiter {

// Micro-kernel variants. All do the same lane-wise multiply-adds on the same
// packed panels; v3 and v4 fuse them (FMA), the baseline does not.
enum class CpuIsa {
  kAuto,       // the best this CPU supports, decided when the candidate is made
  kBaseline,   // x86-64 (SSE2): runs anywhere
  kX86_64_V3,  // AVX2 + FMA
  kX86_64_V4,  // AVX-512
};
const char* CpuIsaName(CpuIsa isa);  // "auto", "baseline", "x86-64-v3", "x86-64-v4"
bool CpuSupports(CpuIsa isa);        // whether this CPU runs the variant (kAuto: true)

struct CpuBlockedOptions {
  // Threads per call; 0 = std::thread::hardware_concurrency().
  int threads = 0;
  // Micro-kernel variant. Forcing one the CPU lacks makes every run
  // FAILED_PRECONDITION; tests force each to cover them all on one machine.
  CpuIsa isa = CpuIsa::kAuto;
};

// Members f32, f64 (native), f16, bf16 (f32 compute, rounded on store).
CandidateSpec MakeCpuBlockedCandidate(const CpuBlockedOptions& options = {});

}  // namespace arbiter
