#!/usr/bin/env bash
# Builds transformer_bench and packs it for the GPU machine into .device-k/
# (git-ignored): the bundled binary xz-compressed, the public shape list and the
# commit it was built from. Then, on the GPU machine (device tool, carry
# [".device-k", ".device-cuda"]): bench/transformer/device_run.sh
#   usage: bench/transformer/bundle.sh [SHAPES_FILE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# The shared folder lives beside the repository; ARBITER_SHARED names it for a
# checkout that has none beside it (a worktree, say).
shared=${ARBITER_SHARED:-$root/../shared}
shapes=${1:-$shared/eval/transformer-shapes.txt}
out=$root/.device-k
build=$root/build-bench
"$root/bench/transformer/build.sh" "$build"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
"${ARBITER_BUNDLE:-$shared/device/bundle}" "$stage/bench" "$build/transformer_bench"
strip --strip-debug "$stage"/bench/bin/* 2>/dev/null || true
rm -rf "$out" && mkdir -p "$out"
tar -C "$stage" -cf - bench | xz -T2 -6 > "$out/bench.tar.xz"
cp "$shapes" "$out/transformer-shapes.txt"
{ git -C "$root" rev-parse --short HEAD; git -C "$root" diff --quiet HEAD -- kernels bench || echo "+dirty"; } > "$out/COMMIT"
echo "bundle: $(du -sh "$out" | cut -f1) in $out (commit $(tr '\n' ' ' < "$out/COMMIT"))"
