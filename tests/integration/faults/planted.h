// The planted faulting candidates of arbiterd_faults, the test daemon of the
// fault tests (never linked into arbiterd). Each is cpu_reference's loop - a
// correct, slow tier-1 candidate - except at its trigger: a problem whose M is
// the value below (any dtype, N and K), so each fault hits one bucket and the
// daemon must go on serving every other one.
#pragma once

#include <cstdint>

namespace arbiter::testing {

inline constexpr int64_t kCrashM = 37;   // planted_crash: SIGSEGV in its first run
inline constexpr int64_t kAbortM = 41;   // planted_crash: abort() in its first run
inline constexpr int64_t kHangM = 67;    // planted_hang: never returns
inline constexpr int64_t kSlowM = 131;   // planted_slow: each run takes kSlowRunSeconds
inline constexpr double kSlowRunSeconds = 3;
inline constexpr int64_t kOutOfBoundsM = 133;  // planted_oob (cuda): writes far past C

}  // namespace arbiter::testing
