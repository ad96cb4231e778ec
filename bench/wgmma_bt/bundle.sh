#!/usr/bin/env bash
# Packs wgmma_bt's device call into OUT_DIR (default .device-k12, git-ignored):
# wgmma_bt_tests from BUILD_DIR (CMake, already built), transformer_bench
# (built here by bench/transformer/build.sh), each bundled with its libraries
# (../shared/device/bundle) and xz-compressed, the public shape list, the
# commit and device_run.sh. On the GPU machine: OUT_DIR/device_run.sh with
# DIR=OUT_DIR (device tool, carry [OUT_DIR]).
#   usage: bench/wgmma_bt/bundle.sh BUILD_DIR [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
shared=${ARBITER_SHARED:-$root/../shared}
build=${1:?usage: bundle.sh BUILD_DIR [OUT_DIR]}
out=${2:-$root/.device-k12}
# SKIP_BENCH_BUILD=1 reuses build-bench/ (bench/transformer/build.sh has no cache).
[[ ${SKIP_BENCH_BUILD:-0} == 1 ]] || "$root/bench/transformer/build.sh" "$root/build-bench"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
"${ARBITER_BUNDLE:-$shared/device/bundle}" "$stage/tests" "$build/bin/wgmma_bt_tests"
"${ARBITER_BUNDLE:-$shared/device/bundle}" "$stage/bench" "$root/build-bench/transformer_bench"
strip --strip-debug "$stage"/*/bin/* 2>/dev/null || true
rm -rf "$out" && mkdir -p "$out"
tar -C "$stage" -cf - tests | xz -T2 -6 > "$out/tests.tar.xz"
tar -C "$stage" -cf - bench | xz -T2 -6 > "$out/bench.tar.xz"
cp "$shared/eval/transformer-shapes.txt" "$out/transformer-shapes.txt"
cp "$root/bench/wgmma_bt/device_run.sh" "$out/device_run.sh"
{ git -C "$root" rev-parse --short HEAD; git -C "$root" diff --quiet HEAD -- kernels bench tests || echo "+dirty"; } > "$out/COMMIT"
echo "bundle: $(du -sh "$out" | cut -f1) in $out (commit $(tr '\n' ' ' < "$out/COMMIT"))"
