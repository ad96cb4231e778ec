#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, in build-asan/ with
# ARBITER_FUZZ=ON: shared with scripts/sanitize.sh) and runs each for a fixed
# budget over its committed corpus, tests/fuzz/corpus/<target> (read only: new
# inputs go to a scratch directory). Prints executions, time and crashes per
# target; exits non-zero on any crash, keeping the input under build-asan/fuzz/.
#
# CI: 30 s per target. By hand, longer and to grow the corpus:
#   ARBITER_FUZZ_SECONDS=3600 scripts/fuzz.sh [target...]
#   (then minimize into the corpus: build-asan/bin/<target> -merge=1 tests/fuzz/corpus/<target> DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${ARBITER_FUZZ_SECONDS:-30}
targets=("$@")
((${#targets[@]})) || targets=(request_fuzzer store_fuzzer)

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARBITER_CUDA=OFF \
  -DCMAKE_CXX_COMPILER=clang++-14 -DARBITER_FUZZ=ON ${ARBITER_CMAKE_ARGS:-} >/dev/null
cmake --build build-asan -j"$(nproc)" --target "${targets[@]}" >/dev/null

export ASAN_OPTIONS="detect_leaks=0"  # the engine's process-wide caches outlive an input by design
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
summary=()
failed=()
for target in "${targets[@]}"; do
  work=build-asan/fuzz/$target
  rm -rf "$work"
  mkdir -p "$work/new" "$work/crashes"
  log=$work/fuzz.log
  if build-asan/bin/"$target" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix="$work/crashes/" \
      "$work/new" "tests/fuzz/corpus/$target" >"$log" 2>&1; then
    result=ok
  else
    result=CRASH
    failed+=("$target")
  fi
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  time_s=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE 'in [0-9]+' | grep -oE '[0-9]+' || echo "$seconds")
  corpus=$(ls "tests/fuzz/corpus/$target" | wc -l)
  crashes=$(ls "$work/crashes" | wc -l)
  summary+=("$target: $result, $runs executions in ${time_s} s, $crashes crashes, seed corpus $corpus inputs, $(ls "$work/new" | wc -l) new")
  [[ $result == ok ]] || tail -60 "$log"
done

echo "== fuzzing ($seconds s per target)"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz.sh: FAILED: ${failed[*]} (inputs in build-asan/fuzz/<target>/crashes)"
  exit 1
fi
echo "fuzz.sh: no crashes"
