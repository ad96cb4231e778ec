#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite: installs
# what is missing, builds everything, runs every test with ctest (GPU tests,
# label `gpu`, report themselves skipped where no GPU is visible; the soak and
# kill -9 harness is label `soak`), then each libFuzzer target for 30 s
# (scripts/fuzz.sh: clang, ASan + UBSan, its own build tree), then the GPU-free
# test binaries under ASan + UBSan in the fuzz targets' tree and the engine and server tests under
# TSan (scripts/sanitize.sh asan tsan). Arguments go to ctest. ARBITER_FUZZ_IN_TEST=0 skips the
# fuzz stage and ARBITER_SANITIZE_IN_TEST=0 the sanitizer stage (quicker local runs).
# Prints each stage's wall time last.
set -euo pipefail
cd "$(dirname "$0")/.."
times=()
stage() {  # stage NAME COMMAND...: runs it, noting its wall time
  local name=$1 start=$SECONDS
  shift
  "$@"
  times+=("$name $((SECONDS - start)) s")
}
stage install-deps scripts/install-deps.sh
stage build scripts/build.sh
stage ctest bash -c 'cd build && ctest --output-on-failure --timeout 900 -j"$(nproc)" "$@"' ctest "$@"
if [[ ${ARBITER_FUZZ_IN_TEST:-1} != 0 ]]; then
  stage fuzz scripts/fuzz.sh
fi
if [[ ${ARBITER_SANITIZE_IN_TEST:-1} != 0 ]]; then
  stage sanitize scripts/sanitize.sh asan tsan
fi
echo "== test.sh: passed; ${times[*]/%/,} total $SECONDS s on $(nproc) cores"
