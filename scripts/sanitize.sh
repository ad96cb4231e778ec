#!/usr/bin/env bash
# The GPU-free tests under sanitizers, each in a build tree of its own (CPU only,
# clang, only the test targets run here):
#   build-asan/  ASan + UBSan + LSan (shared with scripts/fuzz.sh: ARBITER_FUZZ=ON implies
#                both, configured the same way, so the fuzz targets' libraries are reused)
#                every GPU-free test binary: engine, store, server, client, base, CPU backend and kernel, the
#                daemon's logging and faults integration tests (their arbiterd sanitized too); with
#                ARBITER_SANITIZE_SLOW=1 also the CPU candidates and the other integration tests
#   build-tsan/  TSan: engine_tests, server_tests, client_tests and base_tests, where our threads
#                meet (tuner, watchdog, journal, stores; gRPC's threads, interceptors, shutdown; the
#                client's staging buffers and copy threads)
# tests/sanitize/lsan.supp and tsan.supp list what is suppressed, one reason per entry: only
# Debian's uninstrumented libraries (gRPC, protobuf, OpenSSL, abseil's refcounts), never a report
# with both accesses in our code. Every process writes its reports under
# DIR/sanitize-reports/BINARY/ (log_path); a binary passes when it exits 0 and no process of it
# reported anything. Figures: tests/reliability/RESULTS.md, "Sanitizers".
# Prints one line per test binary and a summary; exits non-zero when any fails.
# Usage: scripts/sanitize.sh [asan|tsan]...   (default: both; scripts/test.sh runs both after the
# fuzz stage, ARBITER_SANITIZE_IN_TEST=0 skips them)
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

# Every process reports into its binary's folder under DIR/sanitize-reports (log_path), so that a
# report from an arbiterd the integration tests start fails the stage as surely as one from the
# test binary itself, whatever the test made of that daemon's exit.
export ASAN_OPTIONS="detect_leaks=1:strict_init_order=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitize/tsan.supp"

# faults_integration_tests plants a candidate that raises SIGSEGV in the daemon it starts and
# expects the daemon to die of it (status 128 + SIGSEGV), as it does without ASan; ASan's own
# handler would turn that into a report and exit 1.
declare -A asan_extra=([faults_integration_tests]=":handle_segv=0")

# gtest_counts LOG: "N passed, N skipped, N failed" from what --gtest_brief=1 prints: the closing
# "[  PASSED  ] 12 tests." and "[  SKIPPED ] 1 test." lines, and one "[  FAILED  ] Suite.Name (5 ms)"
# line per failed test (brief prints no failed count); "no gtest summary" where the binary died
# before printing one.
gtest_counts() {
  local passed skipped failed
  passed=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?\..*/\1/p' "$1" | tail -1)
  skipped=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?[.,].*/\1/p' "$1" | tail -1)
  failed=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$1" || true)
  if [[ -z $passed ]]; then
    echo "no gtest summary"
  else
    echo "$passed passed, ${skipped:-0} skipped, $failed failed"
  fi
}

failed=()
summary=()
run() {  # run STAGE DIR BINARY...
  local stage=$1 dir=$2
  shift 2
  for test in "$@"; do
    local log="$dir/sanitize-$test.log" reports="$root/$dir/sanitize-reports/$test" start=$SECONDS
    rm -rf "$reports"
    mkdir -p "$reports"
    local status=0
    ASAN_OPTIONS="$ASAN_OPTIONS${asan_extra[$test]:-}:log_path=$reports/asan" UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$reports/ubsan" \
      TSAN_OPTIONS="$TSAN_OPTIONS:log_path=$reports/tsan" \
      "$dir/bin/$test" --gtest_brief=1 >"$log" 2>&1 || status=$?
    local counts
    counts=$(gtest_counts "$log")
    if ((status == 0)) && [[ -z $(ls -A "$reports") ]]; then
      summary+=("$stage $test: passed, $counts ($((SECONDS - start)) s)")
    else
      summary+=("$stage $test: FAILED, exit $status, $counts, $(ls "$reports" | wc -l) reports ($((SECONDS - start)) s; $log, $reports)")
      failed+=("$stage $test")
      tail -40 "$log"
      for report in "$reports"/*; do
        [[ -e $report ]] && { echo "--- $report"; head -80 "$report"; }
      done
    fi
  done
  return 0  # a failure is counted in $failed; returning it would end the script before the summary
}

# The GPU-free test binaries (those `ctest -LE gpu` runs, less the Python and shell ones). The two
# slowest under ASan run with ARBITER_SANITIZE_SLOW=1 only (by hand; CI's time: RESULTS.md).
asan_tests=(engine_tests store_tests server_tests client_tests base_tests cpu_backend_tests
            cpu_blocked_tests logging_integration_tests faults_integration_tests)
if [[ ${ARBITER_SANITIZE_SLOW:-0} != 0 ]]; then
  asan_tests+=(cpu_candidates_tests integration_tests)
fi
tsan_tests=(engine_tests server_tests client_tests base_tests)

for stage in "${stages[@]}"; do
  start=$SECONDS
  case $stage in
    asan)
      configure build-asan -DARBITER_FUZZ=ON
      cmake --build build-asan -j"$jobs" --target "${asan_tests[@]}" >/dev/null
      summary+=("asan build: $((SECONDS - start)) s")
      run asan build-asan "${asan_tests[@]}"
      ;;
    tsan)
      configure build-tsan -DARBITER_SANITIZE=thread
      cmake --build build-tsan -j"$jobs" --target "${tsan_tests[@]}" >/dev/null
      summary+=("tsan build: $((SECONDS - start)) s")
      run tsan build-tsan "${tsan_tests[@]}"
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
