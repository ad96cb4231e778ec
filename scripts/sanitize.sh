#!/usr/bin/env bash
# The GPU-free tests under sanitizers, each in a build tree of its own (CPU only,
# clang, only the test targets run here):
#   build-asan/  ASan + UBSan (shared with scripts/fuzz.sh: ARBITER_FUZZ=ON implies
#                both, configured the same way, so nothing is rebuilt after fuzz.sh)
#   build-tsan/  TSan (tests/sanitize/tsan.supp lists what is suppressed, and why)
# Both run engine_tests, where our threads meet (tuner, watchdog, journal, stores).
# Not yet here (tests/reliability/RESULTS.md, "Sanitizers"): server_tests under ASan
# (LSan reports the daemon's deliberate leak after an unclean shutdown) and TSan (gRPC
# hands calls between threads inside the uninstrumented libgrpc: ~280 reports to sort
# out); the CPU backend, kernel and integration tests under ASan (not yet run).
# Prints one line per test binary and a summary; exits non-zero when any fails.
# Usage: scripts/sanitize.sh [asan|tsan]...   (default: both)
# scripts/test.sh runs the asan stage after the fuzz stage (ARBITER_SANITIZE_IN_TEST=0 skips it);
# tsan by hand until it has run clean repeatedly (RESULTS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)
stages=("$@")
((${#stages[@]})) || stages=(asan tsan)

configure() {  # configure DIR CMAKE_ARGS...
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARBITER_CUDA=OFF \
    -DCMAKE_CXX_COMPILER=clang++-14 "$@" ${ARBITER_CMAKE_ARGS:-} >/dev/null
}

export ASAN_OPTIONS="detect_leaks=1:strict_init_order=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitize/tsan.supp"

failed=()
summary=()
run() {  # run STAGE DIR BINARY...
  local stage=$1 dir=$2
  shift 2
  for test in "$@"; do
    local log="$dir/sanitize-$test.log" start=$SECONDS
    if "$dir/bin/$test" --gtest_brief=1 >"$log" 2>&1; then
      summary+=("$stage $test: passed ($((SECONDS - start)) s)")
    else
      summary+=("$stage $test: FAILED ($((SECONDS - start)) s; $log)")
      failed+=("$stage $test")
      tail -40 "$log"
    fi
  done
}

for stage in "${stages[@]}"; do
  start=$SECONDS
  case $stage in
    asan)
      tests=(engine_tests)
      configure build-asan -DARBITER_FUZZ=ON
      cmake --build build-asan -j"$jobs" --target "${tests[@]}" >/dev/null
      summary+=("asan build: $((SECONDS - start)) s")
      run asan build-asan "${tests[@]}"
      ;;
    tsan)
      tests=(engine_tests)
      configure build-tsan -DARBITER_SANITIZE=thread
      cmake --build build-tsan -j"$jobs" --target "${tests[@]}" >/dev/null
      summary+=("tsan build: $((SECONDS - start)) s")
      run tsan build-tsan "${tests[@]}"
      ;;
    *) echo "sanitize.sh: unknown stage $stage (asan, tsan)" >&2; exit 2 ;;
  esac
done

echo "== sanitizers"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "sanitize.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "sanitize.sh: all passed"
