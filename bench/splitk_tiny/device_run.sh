#!/usr/bin/env bash
# One device call for splitk_tiny: the SASS check (HMMA, cp.async, no local
# memory), its gtest suite (label gpu), compute-sanitizer memcheck on the
# launch-geometry case, the registry's candidate suite (splitk_tiny raced
# through CudaCandidates), then the timed table, printed last.
# Builds nothing there; about 2 minutes, each step under its own timeout.
# Here, from the repository root:
#   cmake --build build --target splitk_tiny_tests splitk_tiny_bench cuda_candidates_tests
#   ../shared/device/bundle .device-tiny build/bin/splitk_tiny_tests build/bin/splitk_tiny_bench \
#       build/bin/cuda_candidates_tests
#   cp bench/splitk_tiny/device_run.sh .device-tiny/
# There (carry .device-tiny, copied into the session's checkout, /work/main):
#   bash .device-tiny/device_run.sh .device-tiny "$OUT"
set -uo pipefail
bundle=$(cd "$1" && pwd) final=$2
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
bin=$bundle/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$final/device.txt"
date -u +%FT%TZ | tee -a "$final/device.txt"

if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$bin/splitk_tiny_bench" 2>/dev/null |
    awk '/Function :/ {fn=$3} /HMMA/ {h[fn]++} /LDGSTS/ {g[fn]++} /LDL|STL/ {l[fn]++}
         END {for (k in h) print "HMMA", h[k], "LDGSTS", g[k]+0, "LDL/STL", l[k]+0, k}' |
    grep SplitKTiny | sort > "$final/sass.txt"
  echo "sass: $(wc -l < "$final/sass.txt") SplitKTiny kernels, $(awk '$6 > 0' "$final/sass.txt" | wc -l) with local memory"
fi

timeout 60 "$bin/splitk_tiny_tests" > "$final/gtest.log" 2>&1; echo "splitk_tiny_tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differs|^\[       OK|^\[  FAILED" "$final/gtest.log" | head -30

if command -v compute-sanitizer >/dev/null; then
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/splitk_tiny_tests" \
    --gtest_filter='SplitKTinyTest.LaunchGeometry*' > "$final/memcheck.log" 2>&1; echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$final/memcheck.log" | head -5
fi

timeout 40 "$bin/splitk_tiny_bench" --reps 50 > "$final/bench.log" 2>&1; echo "bench rc=$?"

left=$(( 200 - SECONDS ))
if (( left > 20 )); then
  timeout "$left" "$bin/cuda_candidates_tests" > "$final/candidates.log" 2>&1; echo "cuda_candidates_tests rc=$? (limit ${left}s)"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|^\[  FAILED" "$final/candidates.log" | head -20
  grep -E "^CHECK splitk_tiny" "$final/candidates.log" | head -8
else
  echo "cuda_candidates_tests skipped: ${SECONDS}s used"
fi

echo "== splitk_tiny_bench"
grep -E "^(ok|FAIL) |launch floor|splitk_tiny_bench at" "$final/bench.log"
sed -n '/^## bf16/,$p' "$final/bench.log"
