#!/usr/bin/env bash
# One device call for wgmma_ragged (issue 12 item 2), from the repository root
# on the GPU machine, inside one deadline: its GPU tests, compute-sanitizer
# memcheck on its ragged-shape test, then transformer_bench on the ragged
# shapes with cuBLAS, cuBLASLt and cublas_padded in the same process (the
# kernel's own checks first; if the tests failed it is left out of the bench),
# its SASS counts, and Nsight Compute on one launch. Logs under $OUT; the
# summaries are printed last.
#   usage: [DIR=.device-ragged] [DEADLINE=140] bench/wgmma_ragged/device_run.sh
# DIR holds a bundle (../shared/device/bundle) of wgmma_ragged_tests and
# transformer_bench.
set -uo pipefail
dir=${DIR:-.device-ragged}
out=${OUT:-/tmp/out}
mkdir -p "$out"
t0=$(date +%s)
deadline=${DEADLINE:-140}
left() { echo $(( deadline - ($(date +%s) - t0) )); }
export PATH="/usr/local/cuda/bin:$PATH"
run=$dir/run

{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,memory.total,power.limit,temperature.gpu --format=csv
  echo "commit $(tr '\n' ' ' < "$dir/COMMIT" 2>/dev/null)"
} > "$out/device.txt" 2>&1
cat "$out/device.txt"

start=$(date +%s)
timeout 40 "$run" wgmma_ragged_tests > "$out/tests.log" 2>&1
tests_rc=$?
echo "tests rc=$tests_rc in $(( $(date +%s) - start ))s"

start=$(date +%s)
timeout 35 compute-sanitizer --tool memcheck --error-exitcode 9 "$run" wgmma_ragged_tests \
  --gtest_filter='WgmmaRaggedTest.MatchesReferenceAtRaggedShapes' > "$out/memcheck.log" 2>&1
echo "memcheck rc=$? in $(( $(date +%s) - start ))s"

only=cublas,wgmma_ragged
[[ $tests_rc == 0 ]] || only=cublas  # a faulting kernel would end the bench's context
start=$(date +%s)
timeout $(( $(left) - 25 )) "$run" transformer_bench --only "$only" --reps 25 \
  --shape 512x30522x768:f16 --shape 8x30522x768:f16 --shape 8x32001x4096:bf16 \
  > "$out/bench.log" 2>&1
echo "bench rc=$? (only $only) in $(( $(date +%s) - start ))s"

if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$dir/bin/transformer_bench" 2>/dev/null |
    awk '/Function : / {fn=$3} /LDG/ {g[fn]++} /LDG.E.128/ {l[fn]++} /SHFL/ {f[fn]++}
         /HGMMA/ {w[fn]++} /LDL|STL/ {s[fn]++}
         END {for (k in g) if (k ~ /WgmmaRagged/) print "LDG", g[k]+0, "LDG128", l[k]+0, "SHFL", f[k]+0,
              "HGMMA", w[k]+0, "LDL/STL", s[k]+0, k}' | sort > "$out/sass.txt"
  # The f16 kernel's whole SASS, to read the producer's load order from.
  cuobjdump -sass "$dir/bin/transformer_bench" 2>/dev/null |
    awk '/Function : / {p = /WgmmaRaggedKernelILb0/} p' > "$out/sass_f16.txt"
fi

if [[ $tests_rc == 0 ]] && command -v ncu > /dev/null && (( $(left) > 20 )); then
  start=$(date +%s)
  timeout $(( $(left) - 5 )) ncu --clock-control none -k regex:'WgmmaRaggedKernel' -c 1 \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$run" transformer_bench --no-claims --reps 1 --only wgmma_ragged --shape 512x30522x768:f16 \
    > "$out/ncu.log" 2>&1
  echo "ncu rc=$? in $(( $(date +%s) - start ))s"
fi

echo "== done in $(( $(date +%s) - t0 ))s =="
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|Failure|error" "$out/tests.log" | head -20
grep -E "ERROR SUMMARY|Invalid|out of bounds" "$out/memcheck.log" | head -5
cat "$out/sass.txt" 2>/dev/null
grep -E "^(FAIL|WARN)" "$out/bench.log" | head -20
grep -E "correctness failure" "$out/bench.log"
sed -n '/^## Per shape/,$p' "$out/bench.log" | grep -v "^$" | cut -c1-170 | head -60
