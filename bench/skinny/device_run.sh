#!/usr/bin/env bash
# One device call for the skinny family. Correctness first: the SASS check
# (registers, no local memory), the skinny gtest suite and memcheck; then an
# Nsight Compute look at the 64-row launch (stall reasons, occupancy, DRAM);
# then the timed tables, last.
# Builds nothing there; about 2 minutes: every step has its own timeout, and
# the profile and the A/B are skipped when earlier steps ran long (SECONDS).
# Here, from the repository root:
#   cmake --build build --target skinny_bench skinny_tests
#   ../shared/device/bundle .device-skinny build/bin/skinny_bench build/bin/skinny_tests
#   cp bench/skinny/device_run.sh .device-skinny/
#   optionally a previous skinny_bench as .device-skinny/bin/skinny_bench_prev: the
#   same shapes are then timed with it too, in the same call (an A/B of the change);
#   optionally build/bin/cuda_candidates_tests too: the registered candidates
#   (skinny and skinny_wide among them) checked through the registry's path.
# There (carry .device-skinny; the tool sends the session's checkout, /work/main,
# so the bundle must sit in that checkout's ignored .device-skinny):
#   bash .device-skinny/device_run.sh .device-skinny "$OUT"
# At most 8 files come back: the logs and tables are gathered into $OUT last.
set -uo pipefail
bundle=$(cd "$1" && pwd) final=$2
out=$(mktemp -d)
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
bench=$bundle/bin/skinny_bench prev=$bundle/bin/skinny_bench_prev
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$out/device.txt"
date -u +%FT%TZ | tee -a "$out/device.txt"

# The public transformer shapes with M <= 64 (../shared/eval/transformer-shapes.txt)
# and 16-64 rows of the ragged vocabulary and a wide weight.
public=1x15360x5120,1x5120x13824,4x27648x5120,1x32064x3072,16x256000x3584,32x9216x3072,64x18176x4544
rows=16x18176x4544,32x18176x4544,16x9216x3072,64x9216x3072,40x4096x4096,24x14336x4096

# SASS of the skinny_stream kernels: HMMA and LDSM expected, no local memory;
# registers and stack per kernel.
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$bench" 2>/dev/null |
    awk '/Function :/ {fn=$3} /HMMA/ {h[fn]++} /LDSM/ {s[fn]++} /LDGSTS/ {g[fn]++} /LDL|STL/ {l[fn]++}
         END {for (k in h) print "HMMA", h[k], "LDSM", s[k]+0, "LDGSTS", g[k]+0, "LDL/STL", l[k]+0, k}' |
    grep SkinnyStream | sort > "$out/sass.txt"
  cuobjdump -res-usage "$bench" 2>/dev/null | grep -A1 SkinnyStream > "$out/res-usage.txt"
  echo "sass: $(wc -l < "$out/sass.txt") SkinnyStream kernels, $(awk '$8 > 0' "$out/sass.txt" | wc -l) with local memory;" \
       "registers $(grep -o 'REG:[0-9]*' "$out/res-usage.txt" | sort -t: -k2 -n | uniq -c | tr '\n' ' ')"
fi

timeout 60 "$bundle/bin/skinny_tests" > "$final/gtest.log" 2>&1; echo "gtest rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differ" "$final/gtest.log" | head -30
if [[ -x $bundle/bin/cuda_candidates_tests ]]; then
  timeout 60 "$bundle/bin/cuda_candidates_tests" > "$final/candidates.log" 2>&1; echo "cuda_candidates_tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" "$final/candidates.log" | head -20
fi

if command -v compute-sanitizer >/dev/null; then
  timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$bundle/bin/skinny_tests" \
    --gtest_filter='SkinnyStreamTest.LaunchGeometry*:SkinnyStreamTest.MatchesReferenceOnRagged*:SkinnyStreamTest.RaggedNConfigs*' \
    > "$final/memcheck.log" 2>&1; echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$final/memcheck.log" | head -5
fi

# Why 16 and 64 rows are slow or not: the launches at 64x4096x4096 and
# 16x4096x4096 (where cuBLAS still wins), with every stall reason.
if command -v ncu >/dev/null && (( SECONDS < 110 )); then
  timeout 40 ncu --section SpeedOfLight --section Occupancy --section SchedulerStats \
    --section WarpStateStats --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    -k regex:'SkinnyStream|SplitReduce' --launch-skip 3 -c 12 "$bench" \
    --candidates s128x6c2,s256x4c2,s256x4w2 --shapes 64x4096x4096,16x4096x4096 --check_shapes 1x64x64 --reps 3 \
    > "$final/ncu-rows.log" 2>&1
  echo "ncu rc=$?"
  grep -E "SkinnyStreamKernel<|SplitReduceKernel<|Duration|Registers Per|Achieved Occupancy|Issued Warp|Warp Cycles Per Issued|DRAM Throughput|SM Active Cycles|Max Active Clusters" "$final/ncu-rows.log" |
    sed -E 's/void .*unnamed>::/  /; s/\(unnamed>::Params\)//' | cut -c1-120 | head -40
fi

# Timed: the default grid (as in bench/results/skinny-h200.md), then the public
# and row shapes; the previous build on the same shapes.
timeout 40 "$bench" --reps 30 --out "$out" > "$out/bench.log" 2>&1; echo "bench rc=$?"
mkdir -p "$out/public"
timeout 30 "$bench" --reps 30 --shapes "$public,$rows" --check_shapes 1x64x64 \
  --out "$out/public" > "$out/public/bench.log" 2>&1; echo "bench public rc=$?"
if [[ -x $prev ]] && (( SECONDS < 150 )); then
  mkdir -p "$out/prev"
  timeout 30 "$prev" --reps 30 --shapes "$public,$rows" --check_shapes 1x64x64 \
    --out "$out/prev" > "$out/prev/bench.log" 2>&1; echo "bench prev rc=$?"
fi
for log in "$out/bench.log" "$out/public/bench.log" "$out/prev/bench.log"; do
  [[ -f $log ]] || continue
  echo "== $log"
  grep -E "^(FAIL|WARN)" "$log" | head -12
  head -1 "$log" | cut -c1-120
done
if [[ -f $out/prev/bench.log ]]; then
  echo "== public and row shapes, previous build (skinny_bench_prev)"
  sed -n '/^## bf16 median/,/^## geometric/p' "$out/prev/bench.log"
fi
echo "== public and row shapes (this build)"
sed -n '/^## bf16 median/,$p' "$out/public/bench.log"
echo "== default grid (this build)"
sed -n '/^## bf16 median/,$p' "$out/bench.log"
[[ -f $out/skinny_bench.md ]] && cp "$out/skinny_bench.md" "$final/grid.md"
[[ -f $out/public/skinny_bench.md ]] && cp "$out/public/skinny_bench.md" "$final/public.md"
[[ -f $out/prev/skinny_bench.md ]] && cp "$out/prev/skinny_bench.md" "$final/prev.md"
