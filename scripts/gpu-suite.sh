#!/usr/bin/env bash
# gpu-suite.sh: build the CUDA test suite here (no GPU needed to build), bundle it
# with arbiterd for the GPU machine, and print the one `run` command that runs it.
#
#   scripts/gpu-suite.sh            build + bundle into .device-cuda/
#   (there) .device-cuda/suite.sh   run every binary, logs under $OUT, summary table last
#
# Build dir: build-cuda (-DARBITER_CUDA=ON). Bundle: .device-cuda/ (git-ignored): the
# binaries and their libraries, debug info stripped and xz-compressed (a call carries at
# most 64 MiB; uncompressed they are ~75 MiB), plus suite.sh, which unpacks and runs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-cuda
out=$root/.device-cuda
jobs=${JOBS:-2}
# The bundle script lives beside the repository, in the shared folder (../shared);
# ARBITER_BUNDLE names it for a checkout that has no ../shared beside it.
bundle=${ARBITER_BUNDLE:-$root/../shared/device/bundle}
[[ -x $bundle ]] || { echo "gpu-suite: no bundle script at $bundle (set ARBITER_BUNDLE)" >&2; exit 1; }

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARBITER_CUDA=ON >/dev/null
# The test binaries, built here and run there (the bundle carries this list).
tests=(cuda_arch_tests cuda_backend_tests cuda_candidates_tests cuda_daemon_tests cuda_families_contract_tests cuda_families_tests cuda_regions_tests wgmma_tests wgmma_bt_tests wgmma_ragged_tests skinny_tests splitk_tiny_tests mid_stream_tests cublas_padded_tests faults_gpu_integration_tests)
tools=(arbiterd arbiterctl cuda_region_peer arbiterd_faults)
cmake --build "$build" -j"$jobs" --target "${tests[@]}" "${tools[@]}"

rm -rf "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
bins=()
for t in "${tests[@]}" "${tools[@]}"; do
  [[ -x $build/bin/$t ]] && bins+=("$build/bin/$t")
done
"$bundle" "$stage/b" "${bins[@]}"
strip --strip-debug "$stage"/b/bin/*
strip --strip-unneeded "$stage"/b/lib/* 2>/dev/null || true
mkdir -p "$out"
git -C "$root" rev-parse --short HEAD > "$stage/b/COMMIT"
printf '%s\n' "${tests[@]}" > "$stage/b/TESTS"
git -C "$root" diff --quiet HEAD -- backends kernels tests engine server || echo "+dirty" >> "$stage/b/COMMIT"
tar -C "$stage/b" -cf - . | xz -T"$jobs" -6 > "$out/bundle.tar.xz"

# The runner on the GPU machine: every test binary, its full log under $OUT, and a
# summary table (binary, passed, failed, skipped) printed last.
cat > "$out/suite.sh" <<'SUITE'
#!/usr/bin/env bash
# Unpacks the bundle beside it and runs every test binary in it.
here=/tmp/arbiter-cuda-bundle
rm -rf "$here" && mkdir -p "$here"
tar -C "$here" -xJf "$(cd "$(dirname "$0")" && pwd)/bundle.tar.xz" || exit 1
out=${OUT:-/tmp/arbiter-suite}; mkdir -p "$out"
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu /'
  echo "commit $(cat "$here/COMMIT" 2>/dev/null)"
} | tee "$out/device.txt"
summary=()
status=0
mapfile -t tests < "$here/TESTS"  # the list the bundle was built with
for t in "${tests[@]}"; do
  [[ -x $here/bin/$t ]] || continue
  start=$(date +%s)
  "$here/run" "$t" --gtest_color=no >"$out/$t.log" 2>&1
  rc=$?
  [[ $rc -eq 0 ]] || status=1
  passed=$(grep -c '^\[       OK \]' "$out/$t.log")
  failed=$(grep -c '^\[  FAILED  \] .*(' "$out/$t.log")
  skipped=$(grep -c '^\[  SKIPPED \] .*(' "$out/$t.log")
  summary+=("$(printf '%-24s rc=%-3s passed=%-4s failed=%-4s skipped=%-4s %ss' "$t" "$rc" "$passed" "$failed" "$skipped" "$(( $(date +%s) - start ))")")
  grep -E '^\[  FAILED  \]|Failure|error:' "$out/$t.log" | head -40
done
grep -h '^CHECK .*FAIL\|^DETERMINISM .*FAIL' "$out"/*.log | head -40
grep -h '^DAEMON' "$out"/cuda_daemon_tests.log 2>/dev/null | head -40
demo=$(cd "$(dirname "$0")" && pwd)/gpu-daemon-demo.sh
if [[ -x $demo ]]; then
  echo "== daemon on the GPU =="
  "$demo" "$here/run" "$out" 2>&1 | tee "$out/demo.log"
fi
echo "== summary =="
printf '%s\n' "${summary[@]}"
exit $status
SUITE
chmod +x "$out/suite.sh"
cp "$root/scripts/gpu-daemon-demo.sh" "$out/"
echo "bundle: $(du -sh "$out" | cut -f1) in $out (commit $(tr '\n' ' ' < "$stage/b/COMMIT"))"

echo
echo "Run on the GPU machine with the device tool:"
echo "  run  command: \"set -o pipefail; .device-cuda/suite.sh 2>&1 | tee \$OUT/suite.log\""
echo "       carry:   [\".device-cuda\"]   timeout_s: 540"
