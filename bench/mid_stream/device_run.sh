#!/usr/bin/env bash
# One device call for mid_stream (kernels/mid_stream): correctness first, then
# timing. From the repository root on the GPU machine:
#   bash .device-mid/device_run.sh .device-mid "$OUT"
# Here (bench/mid_stream/bundle.sh builds and packs): mid_stream_tests,
# cuda_candidates_tests, floor_bench and transformer_bench in bundle.tar.xz.
#  1. mid_stream_tests (every member and config, ragged M/K/N, f16/bf16, poisoned
#     C and workspace, SM counts 1-500, K = 65536, bitwise repeats, rows
#     independent of M); compute-sanitizer memcheck over the geometry test.
#  2. cuda_candidates_tests: every registered CUDA candidate against the device
#     reference and its determinism claim (mid_stream among them where it is
#     listed in kernels/registry: it was in the run of 8aa2112).
#  3. transformer_bench on issue 12's mid-M shapes: its claims (mid_stream's
#     ragged set), then every candidate checked and timed next to cuBLAS and
#     cuBLASLt (memset and read flushes).
#  4. floor_bench: the read floor of the same bytes (1 and 4 CTAs an SM) next
#     to mid_stream's configs and cublasGemmEx under the read and memset flushes.
#  5. Nsight Compute: DRAM throughput of mid_stream at two shapes.
set -uo pipefail
bundle=$(cd "$1" && pwd) final=$2
mkdir -p "$final"
work=/tmp/midrun && rm -rf "$work" && mkdir -p "$work"
tar -C "$work" -xJf "$bundle/bundle.tar.xz"
run=$work/stage/run
# Every step's timeout is cut to what is left of DEADLINE seconds (the call's limit less a margin).
deadline=${DEADLINE:-285}
cap() { local left=$(( deadline - SECONDS )); (( left < $1 )) && echo $(( left > 5 ? left : 5 )) || echo "$1"; }
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total,power.limit,temperature.gpu \
  --format=csv | tee "$final/device.txt"
{ date -u +%FT%TZ; echo "commit $(cat "$bundle/COMMIT")"; } | tee -a "$final/device.txt"

timeout $(cap 100) "$run" mid_stream_tests > "$final/tests.log" 2>&1; echo "mid_stream_tests rc=$? (${SECONDS}s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differ|^\[  FAILED" "$final/tests.log" | head -20
if command -v compute-sanitizer > /dev/null; then
  LD_LIBRARY_PATH="$work/stage/lib:/usr/local/cuda/lib64" timeout $(cap 60) \
    compute-sanitizer --tool memcheck "$work/stage/bin/mid_stream_tests" \
    --gtest_filter='*LaunchGeometry*:*RepeatsBitwise*' > "$work/memcheck.log" 2>&1
  echo "memcheck rc=$? (${SECONDS}s): $(grep -E 'ERROR SUMMARY' "$work/memcheck.log" | head -1)"
fi
timeout $(cap 60) "$run" cuda_candidates_tests > "$work/registry.log" 2>&1; echo "cuda_candidates_tests rc=$? (${SECONDS}s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$work/registry.log" | head -10
grep -E "mid_stream" "$work/registry.log" | head -40 > "$final/registry-mid.log"
grep -cE "CHECK mid_stream" "$work/registry.log" | sed 's/^/registry checks of mid_stream: /'

shapes=(--shape 96x3072x8192:f16 --shape 32x9216x3072:bf16 --shape 64x18176x4544:bf16
        --shape 128x14336x4096:bf16 --shape 64x8192x8192:bf16 --shape 17x4096x4096:bf16
        --shape 32x4096x4096:bf16 --shape 128x4096x4096:bf16 --shape 64x14336x4096:bf16
        --shape 100x14336x3584:bf16)
timeout $(cap 120) "$run" transformer_bench "${shapes[@]}" --reps 25 > "$final/bench.log" 2>&1
echo "transformer_bench rc=$? (${SECONDS}s)"

timeout $(cap 40) "$run" floor_bench --reps 40 \
  --shapes 96x3072x8192,32x9216x3072,64x18176x4544,128x14336x4096,64x8192x8192,17x4096x4096 \
  --candidates "read 1/SM x4,read 4/SM x1,cublasGemmEx,mid_stream_c256t1,mid_stream_c256t2,mid_stream_c512t1" \
  --variants "read,memset" > "$final/floor.log" 2>&1
echo "floor_bench rc=$? (${SECONDS}s)"

if command -v ncu > /dev/null; then
  timeout $(cap 45) ncu --clock-control none -k regex:MidStreamKernel --section SpeedOfLight \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
    "$run" transformer_bench --no-claims --reps 1 --only mid_stream \
    --shape 64x8192x8192:bf16 --shape 128x14336x4096:bf16 --shape 32x9216x3072:bf16 > "$final/ncu.log" 2>&1
  echo "ncu rc=$? (${SECONDS}s)"
fi

echo "== summary (${SECONDS}s) =="
grep -E "^(FAIL|WARN)" "$final/bench.log" | head -20
grep -E "mid_stream" "$final/bench.log" | grep -E "^(ok|FAIL)" | head -30
sed -n '/^## Served/,$p' "$final/bench.log" | grep -v "^$" | cut -c1-170 | head -40
grep -E "^\| .*(read 1|read 4|mid_stream|cublasGemmEx)|^### " "$final/floor.log" | head -60
grep -E "dram__throughput|gpu__time_duration|dram__bytes_read" "$final/ncu.log" | head -20
