#!/usr/bin/env bash
# One device call for the skinny family. Correctness first: the SASS check
# (registers, no local memory), the skinny gtest suite and memcheck; then an
# Nsight Compute look at why 64 rows are slow (stall reasons) and at the
# narrow-N long-K shape; then the timed tables, last.
# Builds nothing there; under 560 s: every step has its own timeout, and the
# profiles and the A/B are skipped when earlier steps ran long (SECONDS).
# Here, from the repository root:
#   cmake --build build --target skinny_bench skinny_tests
#   ../shared/device/bundle BUNDLE build/bin/skinny_bench build/bin/skinny_tests
#   cp bench/skinny/device_run.sh BUNDLE/
#   optionally a previous skinny_bench as BUNDLE/bin/skinny_bench_prev: the same
#   shapes are then timed with it too, in the same call (an A/B of the change).
# There:  BUNDLE/device_run.sh BUNDLE "$OUT"
set -uo pipefail
bundle=$(cd "$1" && pwd) out=$2
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
bench=$bundle/bin/skinny_bench prev=$bundle/bin/skinny_bench_prev
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$out/device.txt"
date -u +%FT%TZ | tee -a "$out/device.txt"

# The public transformer shapes with M <= 64 (../shared/eval/transformer-shapes.txt),
# narrow N against long K around 16x16x65536, and the 16-64 row weights.
public=1x15360x5120,1x5120x13824,4x27648x5120,1x32064x3072,16x256000x3584,32x9216x3072,64x18176x4544
narrow=16x16x65536,4x16x65536,16x16x16384,16x64x65536,13x24x65536
rows=16x4096x4096,32x4096x4096,64x4096x4096,32x14336x4096,64x14336x4096

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

timeout 150 "$bundle/bin/skinny_tests" > "$out/gtest.log" 2>&1; echo "gtest rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differ" "$out/gtest.log" | head -30

if command -v compute-sanitizer >/dev/null; then
  timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 "$bundle/bin/skinny_tests" \
    --gtest_filter='SkinnyStreamTest.LaunchGeometry*:SkinnyStreamTest.MatchesReferenceOnRagged*' \
    > "$out/memcheck.log" 2>&1; echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | head -5
fi

# Stall reasons at 64 rows (s128x6c2 was 2.9x cuBLAS there, s256x4c2 1.7x) and
# the narrow-N long-K launch with its split reduce; the previous build too.
ncu_look() {  # BINARY LOG SHAPE CANDIDATES
  (( SECONDS < 300 )) || { echo "ncu $3 skipped (${SECONDS} s gone)"; return; }
  timeout 45 ncu --section SpeedOfLight --section Occupancy --section SchedulerStats \
    --section WarpStateStats -k regex:'SkinnyStream|SplitReduce' --launch-skip 3 -c 10 "$1" --candidates "$4" \
    --shapes "$3" --check_shapes 1x64x64 --reps 5 > "$2" 2>&1
  echo "ncu $(basename "$1") $3 rc=$?"
  grep -E "SkinnyStreamKernel<|SplitReduceKernel<|Duration|Registers Per|Achieved Occupancy|No Eligible|Issued Warp|Warp Cycles Per Issued|DRAM Throughput|Stall|stall" "$2" |
    sed -E 's/void .*unnamed>::/  /; s/\(unnamed>::Params\)//' | cut -c1-150 | head -24
}
if command -v ncu >/dev/null; then
  ncu_look "$bench" "$out/ncu-rows.log" 64x4096x4096 s128x6c2,s256x4c2
  [[ -x $prev ]] && ncu_look "$prev" "$out/ncu-rows-prev.log" 64x4096x4096 s128x6c2,s256x4c2
  ncu_look "$bench" "$out/ncu-narrow.log" 16x16x65536 s128x6c2,s128x4c4
  # Every stall reason as a number (cycles per issued instruction), this build.
  (( SECONDS < 300 )) && timeout 45 ncu --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    -k regex:SkinnyStream --launch-skip 3 -c 9 "$bench" --candidates s128x6c2,s256x4c2 \
    --shapes 64x4096x4096 --check_shapes 1x64x64 --reps 5 > "$out/ncu-stalls.log" 2>&1
  echo "ncu stalls rc=$?"
  awk '/SkinnyStreamKernel</ {print "  " substr($0, index($0, "SkinnyStreamKernel<"), 40)}
       /issue_stalled/ && $NF + 0 >= 0.5 {sub(/smsp__average_warps_issue_stalled_/, ""); print "    " $1, $NF}' \
    "$out/ncu-stalls.log" | head -30
fi

# Timed: the default grid (as in bench/results/skinny-h200.md), then the public,
# narrow and row shapes; the previous build on the same shapes.
timeout 100 "$bench" --reps 30 --out "$out" > "$out/bench.log" 2>&1; echo "bench rc=$?"
mkdir -p "$out/public"
timeout 70 "$bench" --reps 30 --shapes "$public,$narrow,$rows" --check_shapes 1x64x64 \
  --out "$out/public" > "$out/public/bench.log" 2>&1; echo "bench public rc=$?"
if [[ -x $prev ]] && (( SECONDS < 480 )); then
  mkdir -p "$out/prev"
  timeout 60 "$prev" --reps 30 --shapes "$public,$narrow,$rows" --check_shapes 1x64x64 \
    --out "$out/prev" > "$out/prev/bench.log" 2>&1; echo "bench prev rc=$?"
fi
for log in "$out/bench.log" "$out/public/bench.log" ${prev:+"$out/prev/bench.log"}; do
  [[ -f $log ]] || continue
  echo "== $log"
  grep -E "^(FAIL|WARN)" "$log" | head -12
  head -1 "$log" | cut -c1-120
done
echo "== public, narrow and row shapes (this build)"
sed -n '/^## bf16 median/,$p' "$out/public/bench.log"
if [[ -f $out/prev/bench.log ]]; then
  echo "== the same shapes, previous build (skinny_bench_prev)"
  sed -n '/^## bf16 median/,/^## geometric/p' "$out/prev/bench.log"
fi
echo "== default grid (this build)"
sed -n '/^## bf16 median/,$p' "$out/bench.log"
