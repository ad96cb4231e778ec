#!/usr/bin/env bash
# One device call for the skinny family: SASS check, the skinny gtest suite,
# memcheck on the geometry and ragged tests, an Nsight Compute look at the
# default skinny_stream config (and s256x4c2), then skinny_bench (its tables printed last).
# Builds nothing there; at most 570 s (every step has its own timeout).
# Here, from the repository root:
#   cmake --build build --target skinny_bench skinny_tests
#   ../shared/device/bundle BUNDLE build/bin/skinny_bench build/bin/skinny_tests
#   cp bench/skinny/device_run.sh BUNDLE/
# There:  BUNDLE/device_run.sh BUNDLE "$OUT"
set -uo pipefail
bundle=$(cd "$1" && pwd) out=$2
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$out/device.txt"
date -u +%FT%TZ | tee -a "$out/device.txt"

# SASS of the skinny_stream kernels: HMMA and LDSM expected, no local memory.
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$bundle/bin/skinny_bench" 2>/dev/null |
    awk '/Function :/ {fn=$3} /HMMA/ {h[fn]++} /LDSM/ {s[fn]++} /LDGSTS/ {g[fn]++} /LDL|STL/ {l[fn]++}
         END {for (k in h) print "HMMA", h[k], "LDSM", s[k]+0, "LDGSTS", g[k]+0, "LDL/STL", l[k]+0, k}' |
    grep SkinnyStream | sort > "$out/sass.txt"
  echo "sass: $(wc -l < "$out/sass.txt") SkinnyStream kernels, $(awk '$8 > 0' "$out/sass.txt" | wc -l) with local memory"
fi

timeout 150 "$bundle/bin/skinny_tests" > "$out/gtest.log" 2>&1; echo "gtest rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differ" "$out/gtest.log" | head -30

if command -v compute-sanitizer >/dev/null; then
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$bundle/bin/skinny_tests" \
    --gtest_filter='SkinnyStreamTest.LaunchGeometry*:SkinnyStreamTest.MatchesReferenceOnRagged*' \
    > "$out/memcheck.log" 2>&1; echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | head -5
fi

if command -v ncu >/dev/null; then
  timeout 90 ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size \
    -k regex:'SkinnyStream|SplitReduce' -c 40 "$bundle/bin/skinny_bench" --candidates s128x6c2,s256x4c2 \
    --shapes 1x4096x4096,16x14336x4096 --check_shapes 1x64x64 --reps 5 > "$out/ncu.log" 2>&1
  echo "ncu rc=$?"
  grep -E "SkinnyStream|SplitReduce|gpu__time|dram__th|warps_active|grid_size" "$out/ncu.log" | sed -E 's/_ZN[^ ]*SkinnyStreamKernel/SkinnyStreamKernel/' | cut -c1-150 | head -40
fi

timeout 240 "$bundle/bin/skinny_bench" --reps 30 --out "$out" > "$out/bench.log" 2>&1; echo "bench rc=$?"
grep -E "^(FAIL|WARN)" "$out/bench.log" | head -20
head -1 "$out/bench.log"
sed -n '/^## bf16 median/,$p' "$out/bench.log"
