#!/usr/bin/env bash
# Settles which TMA box starts the H200 accepts (bench/results/wgmma-ragged-h200.md
# says why it matters): one process per case, since a TMA fault is sticky for
# its context. Build here first (nvcc, sm_90a):
#   nvcc -std=c++17 -O2 -I. -gencode=arch=compute_90a,code=sm_90a \
#     bench/tma_probe/tma_probe.cu -o .device-probe/tma_probe
# then, on the GPU machine (device tool, carry [".device-probe"]):
#   bash bench/tma_probe/device_run.sh .device-probe/tma_probe
# Each line: "base B x X: ok", "...: wrong ..." or the CUDA error.
set -u
probe=${1:?usage: device_run.sh PATH_TO_tma_probe}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# base 0: the map at a 256-byte boundary; 16: only 16-byte aligned (as residue
# maps of a ragged B are). x: the box's first column (2 bytes each).
for c in "0 0" "0 8" "0 64" "16 0" "16 8" "0 1" "0 2" "0 4" "16 1" "0 -8" "0 -1"; do
  # shellcheck disable=SC2086
  timeout 20 "$probe" $c || echo "base/x $c: exit $?"
done
