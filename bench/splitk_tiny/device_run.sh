#!/usr/bin/env bash
# One device call for splitk_tiny: the SASS check (HMMA, cp.async, no local
# memory, instructions per kernel), its gtest suite (label gpu), compute-sanitizer
# memcheck on the launch-geometry and cluster-cap cases, the timed table
# (splitk_tiny beside splitk, cuBLAS and the read floor), the registry's candidate
# suite (splitk_tiny raced through CudaCandidates), then, with time left, Nsight
# Compute on one cold launch of each at 16x16x65536; the table printed last.
# Builds nothing there; under 4 minutes, each step under its own timeout.
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
    awk '/Function :/ {fn=$3} /\/\*[0-9a-f]+\*\// {n[fn]++} /HMMA/ {h[fn]++} /LDGSTS/ {g[fn]++} /LDL|STL/ {l[fn]++}
         END {for (k in h) print "HMMA", h[k], "LDGSTS", g[k]+0, "LDL/STL", l[k]+0, "instructions", n[k]+0, k}' |
    grep SplitKTiny | sort > "$final/sass.txt"
  echo "sass: $(wc -l < "$final/sass.txt") SplitKTiny kernels, $(awk '$6 > 0' "$final/sass.txt" | wc -l) with local memory"
fi

timeout 75 "$bin/splitk_tiny_tests" > "$final/gtest.log" 2>&1; echo "splitk_tiny_tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differs|^\[       OK|^\[  FAILED" "$final/gtest.log" | head -30

if command -v compute-sanitizer >/dev/null; then
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/splitk_tiny_tests" \
    --gtest_filter='SplitKTinyTest.LaunchGeometry*:SplitKTinyTest.RepeatsBitwiseAtEveryClusterCap' \
    > "$final/memcheck.log" 2>&1; echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$final/memcheck.log" | head -5
fi

timeout 60 "$bin/splitk_tiny_bench" --reps 100 > "$final/bench.log" 2>&1; echo "bench rc=$?"

left=$(( 190 - SECONDS ))
if (( left > 20 )); then
  timeout "$left" "$bin/cuda_candidates_tests" > "$final/candidates.log" 2>&1; echo "cuda_candidates_tests rc=$? (limit ${left}s)"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|^\[  FAILED" "$final/candidates.log" | head -20
  grep -E "^CHECK splitk_tiny" "$final/candidates.log" | head -8
else
  echo "cuda_candidates_tests skipped: ${SECONDS}s used"
fi

# Nsight Compute, only with time to spare: SM active cycles against elapsed and
# the warp stall reasons of splitk_tiny at 16x16x65536 (the kernel's launches
# 3-6 in the bench: two repeat checks of the default plan, then two of c4).
left=$(( 215 - SECONDS ))
if command -v ncu >/dev/null && (( left > 25 )); then
  timeout "$left" ncu --clock-control none -k regex:SplitKTinyKernel --launch-skip 2 --launch-count 4 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats \
    --metrics sm__cycles_active.avg,sm__cycles_elapsed.max,gpu__time_duration.sum \
    "$bin/splitk_tiny_bench" --shapes 16x16x65536 --reps 2 > "$final/ncu.log" 2>&1; echo "ncu rc=$? (limit ${left}s)"
  grep -E "SplitKTinyKernel|gpu__time_duration.sum|sm__cycles_active.avg|sm__cycles_elapsed.max|Stall|Warp Cycles Per Issued" "$final/ncu.log" | head -40
else
  echo "ncu skipped: ${SECONDS}s used"
fi

echo "== splitk_tiny_bench"
grep -E "^(ok|FAIL) |launch floor|splitk_tiny_bench at" "$final/bench.log"
sed -n '/^## bf16/,$p' "$final/bench.log"
