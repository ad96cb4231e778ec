#!/usr/bin/env bash
# Runs on the GPU machine after the suite (scripts/gpu-suite.sh bundles it): starts
# arbiterd on the GPU with a fresh store, tunes a spread of shapes that behave
# differently on an H200, prints the verdicts with every candidate's figures, then
# restarts the daemon and shows a stored bucket is served without measuring again.
#   usage: gpu-daemon-demo.sh RUN_WRAPPER OUT_DIR
set -uo pipefail
run=$1
out=$2
store=$(mktemp -d)/verdicts.db
portfile=$(mktemp)
ctl() { "$run" arbiterctl --server "127.0.0.1:$(cat "$portfile")" "$@"; }

start() {
  : >"$portfile"
  "$run" arbiterd --listen 127.0.0.1:0 --port-file "$portfile" --store "$store" --backend cuda \
    --tuning sync >>"$out/arbiterd.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do  # bounded: at most ~60 s for the daemon to come up
    [[ -s $portfile ]] && ctl health >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "arbiterd exited; log:"; tail -20 "$out/arbiterd.log"; return 1; }
    sleep 0.1
  done
  echo "arbiterd did not become SERVING"; return 1
}

start || exit 1
ctl info
ctl tune --dtype bf16 --shape 4096x4096x4096 --shape 4095x4095x4095 --shape 2048x2048x2048 \
  --shape 1024x1024x1024 --shape 16x16x65536 --shape 1x4096x4096 --shape 64x8192x8192 \
  --shape 777x333x2049
ctl matmul --m 4096 --n 4096 --k 4096 --dtype bf16
ctl matmul --m 4095 --n 4095 --k 4095 --dtype bf16
ctl verdicts
ctl --json verdicts >"$out/verdicts.json"
before=$(ctl info | grep -i measurements)
kill -TERM "$pid"; wait "$pid"; echo "arbiterd exit code $?"
start || exit 1
ctl select --m 4096 --n 4096 --k 4096 --dtype bf16
after=$(ctl info | grep -i measurements)
echo "before restart: ${before}"
echo "after restart and a select of a stored bucket: ${after}"
kill -TERM "$pid"; wait "$pid"
