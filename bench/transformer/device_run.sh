#!/usr/bin/env bash
# One device call for issue 12's kernels, from the repository root on the GPU
# machine: the GPU regression suite (.device-cuda/, scripts/gpu-suite.sh), the
# transformer bench (.device-k/, bench/transformer/bundle.sh: checks, then
# timing against cuBLAS), Nsight Compute on the new kernels, and a SASS count.
# Logs under $OUT (at most 8 files come back: the suite's logs go as one tar);
# the bench's tables are printed last.
#   usage: bench/transformer/device_run.sh [SUITE=0|1] [NCU=0|1]
set -uo pipefail
out=${OUT:-/tmp/out}
work=/tmp/devrun
rm -rf "$work" && mkdir -p "$work/suite" "$out"
suite=${SUITE:-1}
profile=${NCU:-1}
export PATH="/usr/local/cuda/bin:$PATH"

{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,memory.total,power.limit,temperature.gpu --format=csv
  cat "$(dirname "$0")/../../.device-k/COMMIT" 2>/dev/null
} > "$out/device.txt" 2>&1
cat "$out/device.txt"

if [[ $suite == 1 && -x .device-cuda/suite.sh ]]; then
  start=$(date +%s)
  OUT=$work/suite timeout 330 .device-cuda/suite.sh > "$work/suite/suite.log" 2>&1
  echo "suite rc=$? in $(( $(date +%s) - start ))s"
  tar -C "$work" -czf "$out/suite.tgz" suite
  sed -n '/== summary ==/,$p' "$work/suite/suite.log"
fi

tar -C "$work" -xJf .device-k/bench.tar.xz
run=$work/bench/run
shapes=.device-k/transformer-shapes.txt

if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$work/bench/bin/transformer_bench" 2>/dev/null |
    awk '/Function : / {fn=$3} /LDG.E.128/ {l[fn]++} /LDG/ {g[fn]++} /HMMA/ {h[fn]++} /HGMMA/ {w[fn]++}
         /LDL|STL/ {s[fn]++} /LDGSTS/ {c[fn]++}
         END {for (k in g) if (k ~ /Skinny|Wgmma/) print "LDG", g[k]+0, "LDG128", l[k]+0, "LDGSTS", c[k]+0,
              "HMMA", h[k]+0, "HGMMA", w[k]+0, "LDL/STL", s[k]+0, k}' | sort > "$out/sass.txt"
  echo "sass: $(wc -l < "$out/sass.txt") kernels; with local memory: $(awk '$12 > 0' "$out/sass.txt" | wc -l)"
fi

if [[ $profile == 1 ]] && command -v ncu > /dev/null; then
  start=$(date +%s)
  timeout 150 ncu --clock-control none -k regex:'Skinny|WgmmaGemmKernel|Pad2d' \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__occupancy_limit_registers,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
    "$run" transformer_bench --no-claims --reps 1 --only skinny \
    --shape 1x4096x4096:bf16 --shape 16x14336x4096:bf16 --shape 1x15360x5120:bf16 \
    --shape 16x16x65536:bf16 --shape 8x30522x768:f16 --shape 64x18176x4544:bf16 \
    > "$work/ncu_skinny.log" 2>&1
  echo "ncu skinny rc=$?"
  timeout 90 ncu --clock-control none -k regex:'WgmmaGemmKernel|Pad2d' \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,launch__grid_size \
    "$run" transformer_bench --no-claims --reps 1 --only cpasync \
    --shape 512x30522x768:f16 > "$work/ncu_wgmma.log" 2>&1
  echo "ncu wgmma rc=$? ($(( $(date +%s) - start ))s)"
  cat "$work/ncu_skinny.log" "$work/ncu_wgmma.log" > "$out/ncu.log"
  grep -E "Skinny|Wgmma|Pad2d|gpu__time_duration|dram__throughput|dram__bytes|sm__throughput|tensor" "$out/ncu.log" |
    sed -E 's/_ZN7arbiter[^ ]*(Skinny|Wgmma)/\1/' | head -80
fi

start=$(date +%s)
timeout 420 "$run" transformer_bench --shapes "$shapes" --reps 25 > "$out/bench.log" 2>&1
echo "bench rc=$? in $(( $(date +%s) - start ))s"
grep -E "^(FAIL|WARN)" "$out/bench.log" | head -30
sed -n '/^## Served/,$p' "$out/bench.log"
