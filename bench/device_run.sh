#!/usr/bin/env bash
# arbiter-bench on the H200 in ONE device call (<= ~9 minutes).
#
# Here (the build machine), from the repository root, after building with CUDA:
#   bench/device_run.sh bundle [BUILD_DIR]      # default BUILD_DIR=build
# bundles arbiter-bench, arbiterd and arbiterctl (debug info stripped) with their
# libraries by ../shared/device/bundle, with the selection shape list, into
# .device-bench/bundle.tar.xz (git-ignored).
#
# There (the device tool, carrying .device-bench):
#   bench/device_run.sh run .device-bench "$OUT"
# runs every section under section budgets (env: KERNELS_S, SELECTION_S,
# TRANSFER_S, SERVICE_S, TOTAL_S), writes $OUT/results.tar.gz (the results folder: CSV,
# method, README.md), $OUT/bench.log, and prints the summary table last.
#
# Back here: tar -xzf <files_at>/results.tar.gz -C bench/results/ (it unpacks as
# h200/), then python3 bench/plot.py bench/results/h200 and commit.
#
# The transfer section alone (a selection change checked in a short call):
#   TRANSFER_SHAPES=16x16x32776,1x12296x6152 bench/device_run.sh transfer .device-bench "$OUT"
# (the mode's comment below says what it writes).
set -uo pipefail
mode=${1:-}
case $mode in
  bundle)
    build=${2:-build}
    for b in arbiter-bench arbiterd arbiterctl unix-socket-rate; do
      [[ -x $build/bin/$b ]] || { echo "device_run: $build/bin/$b missing: build it first" >&2; exit 2; }
    done
    stage=$(mktemp -d)
    mkdir -p "$stage/bin"
    for b in arbiter-bench arbiterd arbiterctl unix-socket-rate; do
      cp "$build/bin/$b" "$stage/bin/" && strip --strip-debug "$stage/bin/$b"
    done
    # The bundle script lives in the shared folder beside the repository (../shared from
    # /work/main, ../../shared from a worktree under /work/wt); ARBITER_BUNDLE overrides.
    bundler=${ARBITER_BUNDLE:-../shared/device/bundle}
    [[ -x $bundler ]] || bundler=../../shared/device/bundle
    "$bundler" "$stage/b" "$stage/bin/arbiter-bench" "$stage/bin/arbiterd" \
      "$stage/bin/arbiterctl" "$stage/bin/unix-socket-rate"
    shapes=../shared/eval/transformer-shapes.txt
    [[ -f $shapes ]] || shapes=../../shared/eval/transformer-shapes.txt
    cp "$shapes" "$stage/b/transformer-shapes.txt"
    git rev-parse --short=12 HEAD > "$stage/b/COMMIT"
    # Compressed: the carried folder must stay well under 64 MiB.
    rm -rf .device-bench && mkdir -p .device-bench
    tar -C "$stage/b" -cf - . | xz -T2 -6 > .device-bench/bundle.tar.xz
    rm -rf "$stage"
    du -sh .device-bench
    ;;
  run)
    out=$3 bundle=/tmp/arbiter-bench-bundle
    rm -rf "$bundle" && mkdir -p "$bundle"
    tar -C "$bundle" -xJf "$2/bundle.tar.xz" || { echo "device_run: cannot unpack $2/bundle.tar.xz"; exit 1; }
    res=$out/h200
    mkdir -p "$res"
    export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
      --format=csv > "$res/clocks.txt" 2>&1
    cat "$res/clocks.txt"
    # The Unix socket's ceiling under the bytes path's wire rows, and the caps on the client's
    # 4 MiB socket buffers (unix_socket_buffers.h): a few seconds.
    { for f in wmem_default wmem_max rmem_max; do echo "net.core.$f $(cat /proc/sys/net/core/$f)"; done
      [[ -x $bundle/bin/unix-socket-rate ]] && timeout 60 "$bundle/bin/unix-socket-rate" 16 40 0 1048576 4194304
    } > "$res/unix_socket_rate.txt" 2>&1
    cat "$res/unix_socket_rate.txt"
    # Budgets (seconds): sections start no new shape after their budget; the whole run is
    # cut at TOTAL_S so the call returns its files.
    timeout "${TOTAL_S:-480}" "$bundle/bin/arbiter-bench" --backend=cuda --out="$res" \
      --arbiterd="$bundle/bin/arbiterd" --shapes="$bundle/transformer-shapes.txt" \
      --clocks_file="$res/clocks.txt" --kernels_budget_s="${KERNELS_S:-180}" \
      --selection_budget_s="${SELECTION_S:-120}" --transfer_budget_s="${TRANSFER_S:-150}" \
      --service_seconds="${SERVICE_S:-1}" \
      --min_samples=10 --max_samples=100 --device_budget_s=0.5 --wall_budget_s=1 \
      ${BENCH_ARGS:-} > "$out/bench.log" 2>&1
    rc=$?
    echo "arbiter-bench rc=$rc (bundle of commit $(cat "$bundle/COMMIT"))"
    # Plots need matplotlib, which the device image may lack: drawn back here when it does.
    python3 "$(dirname "$0")/plot.py" "$res" >> "$out/bench.log" 2>&1 || true
    tar -czf "$out/results.tar.gz" -C "$out" h200 && rm -rf "$res"
    grep -E "^(arbiter-bench|kernels|selection|service) .*(error|fail)" "$out/bench.log" | head -5
    # The summary table, last.
    sed -n '/^arbiter-bench cuda/,$p' "$out/bench.log"
    exit $rc
    ;;
  transfer)
    # The transfer section alone, into $OUT/h200-shapes (only the served shapes in
    # TRANSFER_SHAPES, comma list of MxNxK) and then $OUT/h200-grid (every shape,
    # while TOTAL_S allows): what a selection change is checked against.
    out=$3 bundle=/tmp/arbiter-bench-bundle start=$SECONDS
    rm -rf "$bundle" && mkdir -p "$bundle"
    tar -C "$bundle" -xJf "$2/bundle.tar.xz" || { echo "device_run: cannot unpack $2/bundle.tar.xz"; exit 1; }
    export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
      --format=csv > "$out/clocks.txt" 2>&1
    rc=0
    for part in shapes grid; do
      only=${TRANSFER_SHAPES:-}
      [[ $part == grid ]] && only=
      [[ $part == shapes && -z $only ]] && continue
      left=$(( ${TOTAL_S:-220} - (SECONDS - start) ))
      (( left > 20 )) || { echo "device_run: no time left for $part"; break; }
      res=$out/h200-$part
      mkdir -p "$res" && cp "$out/clocks.txt" "$res/"
      timeout "$left" "$bundle/bin/arbiter-bench" --backend=cuda --out="$res" --sections=transfer \
        --shapes="$bundle/transformer-shapes.txt" --clocks_file="$res/clocks.txt" \
        --transfer_shapes="$only" --transfer_budget_s=$(( left - 30 )) --peak_squares=4096 \
        --min_samples=10 --max_samples=100 --device_budget_s=0.5 --wall_budget_s=1 \
        ${BENCH_ARGS:-} > "$out/bench-$part.log" 2>&1
      rc=$?
      echo "arbiter-bench $part rc=$rc after $((SECONDS - start)) s (bundle of commit $(cat "$bundle/COMMIT"))"
      grep -E "transfer: (before|after)" "$out/bench-$part.log"
      # The rows of the shapes named, and any other whose paired regret is over 1.03 or missing.
      python3 - "$res/transfer.csv" "${TRANSFER_SHAPES:-}" <<'PY' || true
import csv, sys
watch = [s for s in sys.argv[2].split(',') if s]
for r in csv.DictReader(open(sys.argv[1])):
    paired = r['regret_after_paired']
    if r['served_at'] in watch or not paired or float(paired) > 1.03:
        print(r['served_at'], 'after', r['served_after'], 'best', r['best'], 'regret', r['regret_after'],
              'paired', r['regret_after_paired'], r['regret_after_low'], r['regret_after_high'],
              'entrants', r['refine_entrants'])
PY
      tar -czf "$out/results-$part.tar.gz" -C "$out" "h200-$part" && rm -rf "$res"
    done
    exit $rc
    ;;
  *)
    sed -n '2,17p' "$0"
    exit 2
    ;;
esac
