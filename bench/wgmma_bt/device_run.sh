#!/usr/bin/env bash
# One device call for wgmma_bt (issue 12, 17-256 rows), from the repository
# root on the GPU machine: check (wgmma_bt_tests), then time (transformer_bench
# on the issue's four mid-M shapes and an M sweep at 4096x4096 and 14336x4096,
# every candidate plus cuBLAS), then the whole public list (transformer_bench),
# a SASS count and Nsight Compute on the new kernel, inside one deadline.
# Logs under $OUT as one tar; the results tables are printed last.
#   usage: [DEADLINE=250] [DIR=.device-k12] bench/wgmma_bt/device_run.sh
# DIR holds what bench/wgmma_bt/bundle.sh packed: tests.tar.xz, bench.tar.xz,
# transformer-shapes.txt, COMMIT (and this script, when called from a copy).
set -uo pipefail
dir=${DIR:-.device-k12}
out=${OUT:-/tmp/out}
work=/tmp/k12run
rm -rf "$work" && mkdir -p "$work/logs" "$out"
t0=$(date +%s)
deadline=${DEADLINE:-250}
left() { echo $(( deadline - ($(date +%s) - t0) )); }
export PATH="/usr/local/cuda/bin:$PATH"
logs=$work/logs
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,memory.total,power.limit,temperature.gpu --format=csv
  echo "commit $(tr '\n' ' ' < "$dir/COMMIT" 2>/dev/null)"
} > "$logs/device.txt" 2>&1
cat "$logs/device.txt"
tar -C "$work" -xJf "$dir/tests.tar.xz"
tar -C "$work" -xJf "$dir/bench.tar.xz"
bench() { "$work/bench/run" transformer_bench "$@"; }

# 1. check: the kernel's own tests (poisoned C, ragged M, every split count).
start=$(date +%s)
timeout 60 "$work/tests/run" wgmma_bt_tests > "$logs/tests.log" 2>&1
echo "tests rc=$? in $(( $(date +%s) - start ))s"

# 2. time: the issue's mid-M shapes and the M sweep, every candidate (claims first).
sweep=()
for m in 17 32 64 96 128 192 256; do sweep+=(--shape "${m}x4096x4096:bf16" --shape "${m}x14336x4096:bf16"); done
start=$(date +%s)
timeout $(( $(left) * 2 / 5 )) "$work/bench/run" transformer_bench --reps 25 \
  --shape 32x9216x3072:bf16 --shape 96x3072x8192:f16 --shape 64x18176x4544:bf16 \
  --shape 256x14336x3584:bf16 "${sweep[@]}" > "$logs/sweep.log" 2>&1
echo "sweep rc=$? in $(( $(date +%s) - start ))s"

# 3. the public list (16 shapes + the bench's extras), for served/floor.
start=$(date +%s)
timeout $(( $(left) - 45 )) "$work/bench/run" transformer_bench --no-claims --reps 25 \
  --shapes "$dir/transformer-shapes.txt" > "$logs/list.log" 2>&1
echo "list rc=$? in $(( $(date +%s) - start ))s"

if command -v compute-sanitizer > /dev/null && (( $(left) > 50 )); then
  LD_LIBRARY_PATH="$work/tests/lib:/usr/local/cuda/lib64" timeout 35 \
    compute-sanitizer --tool memcheck "$work/tests/bin/wgmma_bt_tests" \
    --gtest_filter='WgmmaBtTest.LaunchGeometryAtEverySplitCount' > "$logs/memcheck.log" 2>&1
  echo "memcheck rc=$? ($(grep -E 'ERROR SUMMARY' "$logs/memcheck.log" | tail -1))"
fi
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$work/bench/bin/transformer_bench" 2>/dev/null |
    awk '/Function : / {fn=$3} /HGMMA/ {w[fn]++} /LDL|STL/ {s[fn]++} /Function : .*WgmmaBt/ {b[$3]=1}
         END {for (k in b) print "HGMMA", w[k]+0, "LDL/STL", s[k]+0, k}' | sort > "$logs/sass.txt"
fi
if command -v ncu > /dev/null && (( $(left) > 20 )); then
  timeout $(( $(left) - 5 )) ncu --clock-control none -k regex:'WgmmaBtKernel' -c 3 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --metrics dram__bytes_read.sum,lts__t_bytes.sum \
    "$work/bench/run" transformer_bench --no-claims --reps 1 --only wgmma_bt \
    --shape 32x9216x3072:bf16 --shape 64x18176x4544:bf16 --shape 256x14336x3584:bf16 > "$logs/ncu.log" 2>&1
  echo "ncu rc=$?"
fi
tar -C "$work" -czf "$out/k12-logs.tgz" logs

echo "== done in $(( $(date +%s) - t0 ))s =="
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|tests? ran|SKIPPED" "$logs/tests.log" | head -20
echo "sass: $(cat "$logs/sass.txt" 2>/dev/null)"
grep -hE "^FAIL|correctness failure" "$logs/sweep.log" "$logs/list.log" | head -20
grep -hE "^\| .*\| wgmma_bt" "$logs/sweep.log" | cut -c1-160 | head -40
for f in sweep list; do
  echo "== $f =="
  sed -n '/^## Served/,$p' "$logs/$f.log" | grep -v "^$" | cut -c1-170 | head -70
done
