#!/usr/bin/env bash
# One device call for issue 12 (where small bandwidth-bound GEMMs lose 5-8 us):
# splitk_tiny's gtest suite (this build's kernel), floor_bench's tables (every
# candidate under every flush variant), an A/B of splitk_tiny against the
# previous build (floor_bench_prev, if bundled: new, prev, new, same
# arguments), then Nsight Compute on splitk_tiny at 16x16x65536 and skinny at
# 1x4096x4096 (every stall reason), and the kernels' own durations under ncu.
# Builds nothing there; under 200 s, each step under its own timeout.
# Here, from the repository root:
#   cmake --build build --target floor_bench splitk_tiny_tests
#   ../shared/device/bundle .device-floor build/bin/floor_bench build/bin/splitk_tiny_tests
#   optionally the previous build's floor_bench as .device-floor/bin/floor_bench_prev
#   cp bench/floor/device_run.sh .device-floor/
# There (carry .device-floor, copied into the session's checkout, /work/main):
#   bash .device-floor/device_run.sh .device-floor "$OUT"
set -uo pipefail
bundle=$(cd "$1" && pwd) final=$2
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
bin=$bundle/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total --format=csv | tee "$final/device.txt"
date -u +%FT%TZ | tee -a "$final/device.txt"

timeout 45 "$bin/splitk_tiny_tests" > "$final/gtest.log" 2>&1; echo "splitk_tiny_tests rc=$? (${SECONDS}s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differs|^\[  FAILED" "$final/gtest.log" | head -20

timeout 50 "$bin/floor_bench" --reps 60 --out "$final" > "$final/floor.log" 2>&1; echo "floor_bench rc=$? (${SECONDS}s)"

ab_args=(--check 0 --reps 60 --shapes 16x16x65536,64x64x8192 --candidates "empty 1x32,splitk_tiny"
         --variants "memset,memset+sync,read,rotate+spin")
if [[ -x $bin/floor_bench_prev ]]; then
  for b in floor_bench floor_bench_prev floor_bench; do
    timeout 15 "$bin/$b" "${ab_args[@]}" 2>&1 | sed -n '/^## /,$p' | sed "s/^## /## $b: /" >> "$final/ab.log"
  done
  echo "A/B done (${SECONDS}s)"
fi

if command -v ncu >/dev/null; then
  sections=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
            --section SchedulerStats --section MemoryWorkloadAnalysis
            --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum')
  (( SECONDS < 120 )) && timeout 30 ncu --clock-control none "${sections[@]}" -k regex:SplitKTiny --launch-skip 3 -c 1 \
    "$bin/floor_bench" --check 0 --reps 1 --shapes 16x16x65536 --candidates splitk_tiny --variants memset \
    > "$final/ncu-tiny.log" 2>&1; echo "ncu tiny rc=$? (${SECONDS}s)"
  (( SECONDS < 140 )) && timeout 30 ncu --clock-control none "${sections[@]}" -k regex:SkinnyStream --launch-skip 3 -c 1 \
    "$bin/floor_bench" --check 0 --reps 1 --shapes 1x4096x4096 --candidates skinny --variants memset \
    > "$final/ncu-skinny.log" 2>&1; echo "ncu skinny rc=$? (${SECONDS}s)"
  (( SECONDS < 160 )) && timeout 30 ncu --clock-control none --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_active.avg \
    "$bin/floor_bench" --check 0 --reps 1 --shapes 16x16x65536,64x64x8192,1x4096x4096,16x4096x4096 \
    --candidates "empty 1x32,empty tiny-grid,read 4/SM x1,read 1/SM x4,splitk_tiny,cublasGemmEx,skinny,skinny_wide" \
    --variants memset > "$final/ncu-durations.csv" 2>&1; echo "ncu durations rc=$? (${SECONDS}s)"
  for f in "$final/ncu-tiny.log" "$final/ncu-skinny.log"; do
    [[ -f $f ]] || continue
    echo "== $f"
    grep -E "Kernel<|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Grid Size|Cluster Size|Warp Cycles Per Issued|No Eligible|stalled_(long_scoreboard|barrier|membar|short_scoreboard|wait|lg_throttle|math|not_selected|selected|sleeping|dispatch|drain|branch|mio|no_instruction|imc|tex)" "$f" |
      sed -E 's/void .*unnamed>::/  /; s/\(unnamed>::Params\)//' | cut -c1-110 | head -40
  done
fi

echo "== floor_bench"
grep -E "^(ok|WARN|FAIL) |floor_bench at|checks" "$final/floor.log" | cut -c1-150
sed -n '/^## /,$p' "$final/floor.log"
[[ -f $final/ab.log ]] && { echo "== A/B splitk_tiny (this build, previous, this build)"; cat "$final/ab.log"; }
echo "total ${SECONDS}s"
