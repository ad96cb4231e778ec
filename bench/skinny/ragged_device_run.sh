#!/usr/bin/env bash
# One device call for skinny_stream's span config (skinny_ragged), <= 120 s:
# the skinny gtest suite (75 s cap) with, beside it (other processes on the
# same GPU; neither times anything), compute-sanitizer memcheck on the span
# launches whose B ends inside a 16-byte chunk at the very end of its exact
# allocation (SpanConfigReadsNothingPastTheEndOfB, then the exact-size case
# SpanConfigMatchesReferenceAtRaggedN) and a SASS count; then, alone on the
# GPU, transformer_bench at ragged decode shapes next to cuBLAS, cuBLASLt,
# cublas_padded, wgmma_ragged and gemv in the same process (it checks every
# candidate on NaN-poisoned C before timing; events; memset and read flushes).
# Here, from the repository root:
#   cmake --build build --target skinny_tests
#   bench/transformer/build.sh build-bench
#   rm -rf /work/main/.device-skinny
#   ../shared/device/bundle /work/main/.device-skinny build/bin/skinny_tests build-bench/transformer_bench
#   cp bench/skinny/ragged_device_run.sh /work/main/.device-skinny/
# There (carry .device-skinny): bash .device-skinny/ragged_device_run.sh .device-skinny "$OUT"
set -uo pipefail
bundle=$(cd "$1" && pwd) out=$2
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
start=$SECONDS
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,memory.total --format=csv
  date -u +%FT%TZ; } | tee "$out/device.txt"

memcheck() {  # test name, log file
  timeout 35 compute-sanitizer --tool memcheck --error-exitcode 9 "$bundle/bin/skinny_tests" \
    --gtest_filter="SkinnyStreamTest.$1" > "$out/$2" 2>&1
  echo "memcheck $1 rc=$?" >> "$out/memcheck_rc.txt"
}
{ memcheck SpanConfigReadsNothingPastTheEndOfB memcheck_end_of_b.log
  memcheck SpanConfigMatchesReferenceAtRaggedN memcheck_ragged_n.log; } &
mc=$!
if command -v cuobjdump > /dev/null; then
  { cuobjdump -sass "$bundle/bin/transformer_bench" 2>/dev/null |
      awk '/Function : / {fn=$3} /LDS.U16/ {u[fn]++} /LDGSTS/ {c[fn]++} /LDG/ && !/LDGSTS/ {g[fn]++}
           /LDSM/ {m[fn]++} /HMMA/ {h[fn]++} /LDL|STL/ {s[fn]++}
           END {for (k in h) if (k ~ /SkinnyStream.*Li128ELi6ELi0ELi/) print "LDS.U16", u[k]+0, "LDGSTS", c[k]+0,
                "LDG", g[k]+0, "LDSM", m[k]+0, "HMMA", h[k]+0, "LDL/STL", s[k]+0, k}' | sort > "$out/sass.txt"; } &
  sass=$!
fi

timeout 75 "$bundle/bin/skinny_tests" > "$out/gtest.log" 2>&1; echo "gtest rc=$? ($((SECONDS - start)) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differ" "$out/gtest.log" | head -20
wait "$mc"; cat "$out/memcheck_rc.txt"
grep -E "ERROR SUMMARY|Invalid|PASSED|FAILED" "$out"/memcheck_*.log | head -8
[ -n "${sass:-}" ] && wait "$sass" &&
  echo "sass: $(wc -l < "$out/sass.txt") span kernels, $(awk '$12 > 0' "$out/sass.txt" | wc -l) with local memory"

# The bench gets what is left of 118 s (its output line-buffered, so a cut
# run keeps what it printed). It exits 1 if any candidate fails its check.
left=$((118 - (SECONDS - start))); [ "$left" -lt 20 ] && left=20
echo "bench: ${left} s left"
shapes=(--shape 8x32001x4096:bf16 --shape 1x32001x4096:bf16 --shape 8x30522x768:f16
        --shape 16x50257x768:bf16 --shape 1x50257x768:bf16 --shape 4x30522x768:f16
        --shape 1x30522x768:f16)
buf=(); command -v stdbuf > /dev/null && buf=(stdbuf -oL)
timeout "$left" "${buf[@]}" "$bundle/bin/transformer_bench" "${shapes[@]}" --reps 21 \
  --only skinny,cublaslt,cublas_padded,wgmma_ragged,gemv > "$out/bench.log" 2>&1
echo "bench rc=$? ($((SECONDS - start)) s)"
grep -E "^(FAIL|WARN)|correctness failure|launch floor" "$out/bench.log" | head -20
sed -n '/^## /,$p' "$out/bench.log" | grep -v "^$" | cut -c1-200 | head -80
