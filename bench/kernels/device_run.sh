#!/usr/bin/env bash
# One device call: SASS check, gtest suite, memcheck on the small shapes, then the
# check-and-time tool (its table printed last). Run on the GPU machine from the
# repository root, after `../shared/device/bundle .device-kernels
#   build-kernels/bin/{cuda_families_tests,cuda_kernels_check}` here (from the
#   repository root; the bundle script lives in the shared folder beside it).
#   usage: bench/kernels/device_run.sh BUNDLE_DIR OUT_DIR
set -uo pipefail
bundle=$1 out=$2
export LD_LIBRARY_PATH="$(cd "$bundle" && pwd)/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee "$out/device.txt"
date -u +%FT%TZ | tee -a "$out/device.txt"

# SASS: tensor-core kernels must show HMMA; count per kernel.
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass -arch sm_90 "$bundle/bin/cuda_kernels_check" 2>/dev/null |
    awk '/Function :/ {fn=$3} /HMMA/ {h[fn]++} /FFMA/ {f[fn]++} /LDL|STL/ {l[fn]++}
         END {for (k in h) print "HMMA", h[k], "FFMA", f[k]+0, "LDL/STL", l[k]+0, k}' |
    sed -E 's/_ZN7arbiter7kernels[^ ]*_GLOBAL__N__[0-9a-f_]*cu_[0-9a-f]+//' | sort > "$out/sass.txt"
  echo "sass: $(wc -l < "$out/sass.txt") kernels with HMMA"; cut -c1-60 "$out/sass.txt" | sort | uniq -c | head -20
else
  echo "sass: no cuobjdump on the device machine"
fi

timeout 240 "$bundle/bin/cuda_families_tests" 2>&1 > "$out/gtest.log"; echo "gtest rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|Failure" "$out/gtest.log" | head -40

if command -v compute-sanitizer >/dev/null; then
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$bundle/bin/cuda_families_tests" \
    --gtest_filter='*LaunchGeometry*' > "$out/memcheck.log" 2>&1; echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | head -5
fi

if command -v ncu >/dev/null; then
  timeout 90 ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    -c 12 -k regex:'Gemv|SplitReduce' "$bundle/bin/cuda_kernels_check" --shapes 1x4096x4096,16x16x65536 --reps 3 \
    > "$out/ncu.log" 2>&1; echo "ncu rc=$?"
fi

timeout 240 "$bundle/bin/cuda_kernels_check" --reps 25 > "$out/bench.log" 2>&1; echo "bench rc=$?"
grep -E "^(FAIL|WARN)" "$out/bench.log" | head -20
sed -n '/^## bf16/,$p' "$out/bench.log"
