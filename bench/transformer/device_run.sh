#!/usr/bin/env bash
# One device call for issue 12's kernels, from the repository root on the GPU
# machine: the GPU regression suite (.device-cuda/, scripts/gpu-suite.sh), the
# transformer bench (.device-k/, bench/transformer/bundle.sh: checks, then
# timing against cuBLAS), a SASS count and Nsight Compute on the new kernels,
# all inside one deadline. Logs under $OUT (at most 8 files come back: the
# suite's logs go as one tar); the summaries are printed last.
#   usage: [SUITE=0] [NCU=0] [DEADLINE=560] [BENCH_DIR=.device-k] [SUITE_DIR=.device-cuda] \
#          bench/transformer/device_run.sh
# (The device tool sends the session's checkout: from a helper's worktree, copy
# both folders and this script into an ignored folder of that checkout and point
# BENCH_DIR and SUITE_DIR there.)
set -uo pipefail
bench_dir=${BENCH_DIR:-.device-k}
suite_dir=${SUITE_DIR:-.device-cuda}
out=${OUT:-/tmp/out}
work=/tmp/devrun
rm -rf "$work" && mkdir -p "$work/suite" "$out"
t0=$(date +%s)
deadline=${DEADLINE:-560}
left() { echo $(( deadline - ($(date +%s) - t0) )); }
export PATH="/usr/local/cuda/bin:$PATH"

{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,memory.total,power.limit,temperature.gpu --format=csv
  echo "bench commit $(tr '\n' ' ' < $bench_dir/COMMIT 2>/dev/null)"
} > "$out/device.txt" 2>&1
cat "$out/device.txt"

if [[ ${SUITE:-1} == 1 && -x $suite_dir/suite.sh ]]; then
  start=$(date +%s)
  OUT=$work/suite timeout 220 "$suite_dir/suite.sh" > "$work/suite/suite.log" 2>&1
  echo "suite rc=$? in $(( $(date +%s) - start ))s"
  tar -C "$work" -czf "$out/suite.tgz" suite
fi

tar -C "$work" -xJf "$bench_dir/bench.tar.xz"
run=$work/bench/run
start=$(date +%s)
timeout $(( $(left) - 60 )) "$run" transformer_bench --shapes "$bench_dir/transformer-shapes.txt" \
  --reps 25 > "$out/bench.log" 2>&1
echo "bench rc=$? in $(( $(date +%s) - start ))s"

if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$work/bench/bin/transformer_bench" 2>/dev/null |
    awk '/Function : / {fn=$3} /LDG/ {g[fn]++} /LDG.E.128/ {l[fn]++} /LDGSTS/ {c[fn]++}
         /HMMA/ {h[fn]++} /HGMMA/ {w[fn]++} /LDL|STL/ {s[fn]++}
         END {for (k in g) if (k ~ /Skinny|Wgmma/) print "LDG", g[k]+0, "LDG128", l[k]+0, "LDGSTS", c[k]+0,
              "HMMA", h[k]+0, "HGMMA", w[k]+0, "LDL/STL", s[k]+0, k}' | sort > "$out/sass.txt"
fi

if [[ ${NCU:-1} == 1 ]] && command -v ncu > /dev/null && (( $(left) > 40 )); then
  start=$(date +%s)
  timeout $(( $(left) * 2 / 3 )) ncu --clock-control none -k regex:'SkinnyKernel|Pad2dKernel' \
    --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum \
    "$run" transformer_bench --no-claims --reps 1 --only skinny,cublas_padded \
    --shape 1x4096x4096:bf16 --shape 16x14336x4096:bf16 --shape 16x16x65536:bf16 \
    --shape 32x9216x3072:bf16 --shape 8x30522x768:f16 --shape 4095x4095x4095:bf16 \
    > "$work/ncu1.log" 2>&1
  echo "ncu skinny/pad rc=$? in $(( $(date +%s) - start ))s"
  start=$(date +%s)
  timeout $(( $(left) > 5 ? $(left) : 5 )) ncu --clock-control none -k regex:'WgmmaGemmKernel' -c 2 \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$run" transformer_bench --no-claims --reps 1 --only 128x256_cpasync --shape 512x30522x768:f16 \
    > "$work/ncu2.log" 2>&1
  echo "ncu cpasync rc=$? in $(( $(date +%s) - start ))s"
  cat "$work/ncu1.log" "$work/ncu2.log" > "$out/ncu.log"
fi

echo "== done in $(( $(date +%s) - t0 ))s =="
if [[ -f $work/suite/suite.log ]]; then sed -n '/== summary ==/,$p' "$work/suite/suite.log"; fi
echo "sass: $(wc -l < "$out/sass.txt" 2>/dev/null) kernels; with LDL/STL: $(awk '$12 > 0' "$out/sass.txt" 2>/dev/null | wc -l)"
grep -E "^(FAIL|WARN)" "$out/bench.log" | head -20
grep -E "geometric mean|correctness failure" "$out/bench.log"
sed -n '/^## Served/,$p' "$out/bench.log" | grep -v "^$" | cut -c1-150 | head -90
