#!/usr/bin/env bash
# Builds and packs mid_stream's device run into DEST (git-ignored, e.g. the
# session checkout's .device-mid): the family's tests, the registry's device
# tests, floor_bench (CMake build in build/) and transformer_bench
# (bench/transformer/build.sh), bundled with their libraries, debug info
# stripped, xz-compressed; and bench/mid_stream/device_run.sh. ARBITER_SHARED
# names the shared folder where it is not beside the checkout (a worktree).
#   usage: bench/mid_stream/bundle.sh DEST
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: bundle.sh DEST}
cmake --build "$root/build" -j2 --target mid_stream_tests cuda_candidates_tests floor_bench
"$root/bench/transformer/build.sh" "$root/build-bench"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
"${ARBITER_SHARED:-$root/../shared}/device/bundle" "$stage/stage" "$root/build/bin/mid_stream_tests" \
  "$root/build/bin/cuda_candidates_tests" "$root/build/bin/floor_bench" "$root/build-bench/transformer_bench"
strip --strip-debug "$stage"/stage/bin/* 2>/dev/null || true
rm -rf "$dest" && mkdir -p "$dest"
tar -C "$stage" -cf - stage | xz -T2 -6 > "$dest/bundle.tar.xz"
cp "$root/bench/mid_stream/device_run.sh" "$dest/"
{ git -C "$root" rev-parse --short HEAD; git -C "$root" diff --quiet HEAD -- kernels bench || echo "+dirty"; } > "$dest/COMMIT"
echo "bundle: $(du -sh "$dest" | cut -f1) in $dest (commit $(tr '\n' ' ' < "$dest/COMMIT"))"
