#!/usr/bin/env bash
# python_cuda.sh: the Python client's CUDA-tensor cases (tests/client/python/test_cuda.py) on the GPU
# machine, against a CUDA arbiterd on a Unix socket.
#
#   here:   tests/device/python_cuda.sh          build arbiterd (CUDA) and the package with its stubs
#                                                (Debian's protoc 3.21 + grpc_python_plugin: newer
#                                                protobuf runtimes load their output), bundle them and
#                                                the test files into .device-py/ (git-ignored)
#   there:  .device-py/python_cuda.sh run        unpack, start arbiterd --backend cuda on a Unix socket
#                                                with a fresh store, run the CUDA pytest cases with the
#                                                machine's python3 (torch, grpcio, protobuf, pytest),
#                                                print a table last; logs and results under $OUT
#
# Build dir: build-cuda (BUILD_DIR overrides; -DARBITER_CUDA=ON), as scripts/gpu-suite.sh uses.
set -euo pipefail

if [[ ${1:-} == run ]]; then
  here=$(cd "$(dirname "$0")" && pwd)
  work=/tmp/arbiter-py-cuda
  out=${OUT:-/tmp/arbiter-py-cuda-out}
  rm -rf "$work" && mkdir -p "$work" "$out"
  tar -C "$work" -xJf "$here/bundle.tar.xz"
  {
    date -u +"date %Y-%m-%dT%H:%M:%SZ"
    echo "commit $(tr '\n' ' ' < "$work/COMMIT")"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu /' || true
    python3 -c 'import sys, torch, grpc, google.protobuf as p
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "grpcio", grpc.__version__, "protobuf", p.__version__)' 2>&1 || true
  } | tee "$out/device.txt"
  socket=$work/arbiterd.sock
  "$work/run" arbiterd --listen "unix:$socket" --port-file "$work/port" --backend cuda \
    --store "$work/verdicts.db" >"$out/arbiterd.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 1200); do  # bounded: at most ~120 s for device checks and the store
    [[ -s $work/port ]] && break
    kill -0 "$daemon" 2>/dev/null || { echo "arbiterd exited:"; tail -20 "$out/arbiterd.log"; exit 1; }
    sleep 0.1
  done
  [[ -s $work/port ]] || { echo "arbiterd did not serve within 120 s"; tail -20 "$out/arbiterd.log"; exit 1; }
  status=0
  ARBITER_CUDA_ADDRESS=unix:$socket ARBITER_RESULTS=$out/results.tsv PYTHONPATH=$work/python \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    timeout 480 python3 -m pytest -p no:cacheprovider -rA -v "$work/tests/test_cuda.py" \
    >"$out/pytest.log" 2>&1 || status=$?
  kill -TERM "$daemon" 2>/dev/null; wait "$daemon"; echo "arbiterd exit code $?"
  if grep -q '^SKIPPED' "$out/pytest.log"; then  # here every case must run: a skip is a broken setup
    echo "CUDA cases were skipped on the GPU machine: torch sees no GPU, or the daemon's address was lost"
    status=1
  fi
  grep -E '^(E |FAILED|ERROR)' "$out/pytest.log" | head -60 || true
  tail -3 "$out/pytest.log"
  echo "== table (pytest exit $status) =="
  python3 - "$out/pytest.log" "$out/results.tsv" <<'TABLE'
import re, sys
outcomes = [l.split(" ", 1) for l in open(sys.argv[1]) if re.match(r"(PASSED|FAILED|ERROR|SKIPPED) ", l)]
for outcome, test in outcomes:
    print("%-8s %s" % (outcome, test.strip().split("::")[-1]))
try:
    rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[2])]
except FileNotFoundError:
    rows = []
widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(map(len, rows), default=0))]
for r in rows:
    print("  ".join(f.ljust(w) for f, w in zip(r, widths)).rstrip())
TABLE
  exit $status
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-cuda}
out=$root/.device-py
jobs=${JOBS:-2}
bundle=${ARBITER_BUNDLE:-$root/../shared/device/bundle}
[[ -x $bundle ]] || { echo "python_cuda: no bundle script at $bundle (set ARBITER_BUNDLE)" >&2; exit 1; }

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARBITER_CUDA=ON >/dev/null
cmake --build "$build" -j"$jobs" --target arbiterd arbiter_python

rm -rf "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
"$bundle" "$stage/b" "$build/bin/arbiterd"
strip --strip-debug "$stage"/b/bin/*
strip --strip-unneeded "$stage"/b/lib/* 2>/dev/null || true
cp -r "$build/python" "$stage/b/python"
mkdir -p "$stage/b/tests"
cp "$root"/tests/client/python/{test_cuda.py,cuda_worker.py} "$stage/b/tests/"
git -C "$root" rev-parse --short HEAD > "$stage/b/COMMIT"
git -C "$root" diff --quiet HEAD -- client/python tests/client/python || echo "+dirty" >> "$stage/b/COMMIT"
mkdir -p "$out"
tar -C "$stage/b" -cf - . | xz -T"$jobs" -6 > "$out/bundle.tar.xz"
cp "$0" "$out/python_cuda.sh"
echo "bundle: $(du -sh "$out" | cut -f1) in $out (commit $(tr '\n' ' ' < "$stage/b/COMMIT"))"
echo
echo "Run on the GPU machine with the device tool:"
echo "  run  command: \"set -o pipefail; .device-py/python_cuda.sh run 2>&1 | tee \$OUT/python_cuda.log\""
echo "       carry:   [\".device-py\"]   timeout_s: 600"
