#!/usr/bin/env bash
# One device call for skinny_stream's span config (skinny_ragged): the skinny
# gtest suite, compute-sanitizer memcheck on the span launches whose B ends
# inside a 16-byte chunk at the very end of its allocation, a SASS count, then
# transformer_bench at ragged decode shapes next to cuBLAS, cuBLASLt,
# cublas_padded and wgmma_ragged in the same process (it checks every
# candidate on NaN-poisoned C before timing; events; memset and read flushes).
# Here, from the repository root:
#   cmake --build build --target skinny_tests
#   bench/transformer/build.sh build-bench
#   ../shared/device/bundle /work/main/.device-skinny build/bin/skinny_tests build-bench/transformer_bench
#   cp bench/skinny/ragged_device_run.sh /work/main/.device-skinny/
# There (carry .device-skinny): bash .device-skinny/ragged_device_run.sh .device-skinny "$OUT"
set -uo pipefail
bundle=$(cd "$1" && pwd) out=$2
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,memory.total --format=csv
  date -u +%FT%TZ; } | tee "$out/device.txt"

timeout 75 "$bundle/bin/skinny_tests" > "$out/gtest.log" 2>&1; echo "gtest rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differ" "$out/gtest.log" | head -20

timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$bundle/bin/skinny_tests" \
  --gtest_filter='SkinnyStreamTest.SpanConfigReadsNothingPastTheEndOfB' > "$out/memcheck.log" 2>&1
echo "memcheck rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | head -5

if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$bundle/bin/transformer_bench" 2>/dev/null |
    awk '/Function : / {fn=$3} /LDS.U16/ {u[fn]++} /LDGSTS/ {c[fn]++} /LDSM/ {m[fn]++} /HMMA/ {h[fn]++}
         /LDL|STL/ {s[fn]++}
         END {for (k in h) if (k ~ /SkinnyStream.*Li128ELi6ELi0ELi/) print "LDS.U16", u[k]+0, "LDGSTS", c[k]+0,
              "LDSM", m[k]+0, "HMMA", h[k]+0, "LDL/STL", s[k]+0, k}' | sort > "$out/sass.txt"
  echo "sass: $(wc -l < "$out/sass.txt") span kernels, $(awk '$10 > 0' "$out/sass.txt" | wc -l) with local memory"
fi

shapes=(--shape 8x32001x4096:bf16 --shape 1x32001x4096:bf16 --shape 8x30522x768:f16
        --shape 16x50257x768:bf16 --shape 4x30522x768:f16)
timeout 80 "$bundle/bin/transformer_bench" "${shapes[@]}" --reps 25 \
  --only skinny,gemv,cublaslt,cublas_padded,wgmma_ragged > "$out/bench.log" 2>&1
echo "bench rc=$?"
grep -E "^(FAIL|WARN)|correctness failure|launch floor" "$out/bench.log" | head -20
sed -n '/^## /,$p' "$out/bench.log" | grep -v "^$" | cut -c1-200 | head -80
