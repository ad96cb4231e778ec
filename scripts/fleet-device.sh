#!/usr/bin/env bash
# fleet-device.sh: build arbiterd + arbiterctl with CUDA here, bundle them with
# Debian's PostgreSQL server for the GPU machine (which has no PostgreSQL), and
# write the runner that exercises a fleet there.
#
#   scripts/fleet-device.sh          build + bundle into .device-fleet/
#   (there) .device-fleet/fleet.sh   the fleet run; logs under $OUT (six files: the device
#                                    tool brings back at most eight), results table last
#
# The run: one PostgreSQL (initdb into /tmp, 127.0.0.1, a free port) and two
# arbiterd on it (--backend cuda --device N; one per GPU where the machine has
# two, else both on GPU 0 - a test arrangement only), then
#   1. a bucket tuned through daemon 0 is served by daemon 1 as measured, with no
#      measurement on daemon 1;
#   2. a force through daemon 1 is seen by daemon 0 (time to see it reported);
#   3. daemon 0 measures a fresh bucket, daemon 1 asks for it and waits on daemon
#      0's lease, daemon 0 is killed with SIGKILL mid-measurement, and daemon 1
#      measures and serves the bucket.
# Bundle: .device-fleet/ (git-ignored), xz-compressed (a call carries at most 64 MiB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-cuda}
out=$root/.device-fleet
jobs=${JOBS:-2}
bundle=${ARBITER_BUNDLE:-$root/../shared/device/bundle}
[[ -x $bundle ]] || { echo "fleet-device: no bundle script at $bundle (set ARBITER_BUNDLE)" >&2; exit 1; }
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -1)
[[ -n $pgbin ]] || { echo "fleet-device: PostgreSQL server not installed (apt-get install postgresql)" >&2; exit 1; }
pgver=$(basename "$(dirname "$pgbin")")

launchers=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$root")}
  launchers=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARBITER_CUDA=ON "${launchers[@]}" >/dev/null
cmake --build "$build" -j"$jobs" --target arbiterd arbiterctl

rm -rf "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
"$bundle" "$stage/b" "$build/bin/arbiterd" "$build/bin/arbiterctl" \
  "$pgbin/postgres" "$pgbin/initdb"
# pg_ctl needs only the C library, which the bundle script fails on: copied as is.
cp -L "$pgbin/pg_ctl" "$stage/b/bin/"
# PostgreSQL finds its share and library folders relative to its binaries (the
# install is relocatable), so they keep Debian's layout under pg/.
pg=$stage/b/pg
mkdir -p "$pg/usr/lib/postgresql/$pgver/bin" "$pg/usr/lib/postgresql/$pgver/lib" "$pg/usr/share/postgresql"
for tool in postgres initdb pg_ctl; do mv "$stage/b/bin/$tool" "$pg/usr/lib/postgresql/$pgver/bin/"; done
find "/usr/lib/postgresql/$pgver/lib" -maxdepth 1 -name '*.so' ! -name 'llvmjit*' \
  -exec cp {} "$pg/usr/lib/postgresql/$pgver/lib/" \;
cp -r "/usr/share/postgresql/$pgver" "$pg/usr/share/postgresql/"
strip --strip-debug "$stage"/b/bin/* "$pg/usr/lib/postgresql/$pgver/bin/"*
strip --strip-unneeded "$stage"/b/lib/* 2>/dev/null || true
git -C "$root" rev-parse --short HEAD > "$stage/b/COMMIT"
git -C "$root" diff --quiet HEAD -- engine server backends kernels || echo "+dirty" >> "$stage/b/COMMIT"
echo "$pgver" > "$stage/b/PGVERSION"
mkdir -p "$out"
tar -C "$stage/b" -cf - . | xz -T"$jobs" -6 > "$out/bundle.tar.xz"

cat > "$out/fleet.sh" <<'FLEET'
#!/usr/bin/env bash
# Unpacks the bundle beside it and runs the fleet scenario; results table last.
set -uo pipefail
here=/tmp/arbiter-fleet
rm -rf "$here" && mkdir -p "$here"
tar -C "$here" -xJf "$(cd "$(dirname "$0")" && pwd)/bundle.tar.xz" || exit 1
out=${OUT:-/tmp/arbiter-fleet-out}; mkdir -p "$out"
pgver=$(cat "$here/PGVERSION")
pgbin=$here/pg/usr/lib/postgresql/$pgver/bin
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
results=()
record() { results+=("$(printf '%-44s %-6s %s' "$1" "$2" "$3")"); echo "== $1: $2 $3"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f} s')" "$1" "$(now)"; }
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu /'
  echo "commit $(cat "$here/COMMIT")"
} | tee "$out/device.txt"

# PostgreSQL will not run as root: an unprivileged user owns its data folder.
pguser=postgres
id -u "$pguser" >/dev/null 2>&1 || useradd -r -M "$pguser" 2>/dev/null || pguser=nobody
chmod -R a+rX "$here"
pgdata=$here/pgdata; mkdir -p "$pgdata" && chown "$pguser" "$pgdata"
as_pg() { if [[ $(id -u) == 0 ]]; then runuser -u "$pguser" -- "$@"; else "$@"; fi; }
pgport=$(free_port)
as_pg "$pgbin/initdb" -D "$pgdata/data" -A trust -U arbiter >"$here/initdb.log" 2>&1 \
  || { cat "$here/initdb.log"; echo "FAIL: initdb"; exit 1; }
as_pg "$pgbin/pg_ctl" -D "$pgdata/data" -l "$pgdata/log" -w \
  -o "-p $pgport -k $pgdata -c listen_addresses=127.0.0.1" start >/dev/null \
  || { cat "$pgdata/log"; echo "FAIL: PostgreSQL did not start"; exit 1; }
uri="postgresql://arbiter@127.0.0.1:$pgport/postgres"
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [[ -n $p ]] && kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  as_pg "$pgbin/pg_ctl" -D "$pgdata/data" stop -m fast >/dev/null 2>&1
  cp "$pgdata/log" "$out/postgres.log" 2>/dev/null
}
trap cleanup EXIT

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
dev0=0; dev1=$(( gpus > 1 ? 1 : 0 ))
echo "gpus $gpus: daemon 0 on GPU $dev0, daemon 1 on GPU $dev1" | tee -a "$out/device.txt"
declare -A addr pid
start() {  # start N DEVICE TUNING
  local port; port=$(free_port)
  "$here/run" arbiterd --backend cuda --device "$2" --store "$uri" --tuning "$3" \
    --listen "127.0.0.1:$port" >"$out/daemon$1.log" 2>&1 &
  pid[$1]=$!; pids+=("$!"); addr[$1]=127.0.0.1:$port
  for _ in $(seq 1 300); do
    "$here/run" arbiterctl --server "${addr[$1]}" health 2>/dev/null | grep -q SERVING && return 0
    kill -0 "${pid[$1]}" 2>/dev/null || { tail -5 "$out/daemon$1.log"; return 1; }
    sleep 0.1
  done
  return 1
}
ctl() { local n=$1; shift; "$here/run" arbiterctl --server "${addr[$n]}" --timeout 600 "$@"; }
measurements() { ctl "$1" --json info | python3 -c 'import json,sys; print(json.load(sys.stdin).get("measurements", 0))'; }
source_of() { ctl "$1" --json select "${@:2}" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("source", "?"))'; }

start 0 "$dev0" sync || { echo "FAIL: daemon 0 did not start"; exit 1; }
start 1 "$dev1" sync || { echo "FAIL: daemon 1 did not start"; exit 1; }
fp0=$(ctl 0 --json info | python3 -c 'import json,sys; print(json.load(sys.stdin)["fingerprint"])')
fp1=$(ctl 1 --json info | python3 -c 'import json,sys; print(json.load(sys.stdin)["fingerprint"])')
[[ $fp0 == "$fp1" ]] && record "fingerprints match (UUID excluded)" ok "$fp0" \
  || record "fingerprints match (UUID excluded)" FAIL "$fp0 vs $fp1"

# 1. Tuned through daemon 0, served by daemon 1 without measuring.
t=$(now); ctl 0 tune --dtype bf16 --shape 2048x2048x2048 | tee -a "$out/steps.log"
tune_time=$(since "$t")
src=$(source_of 1 --dtype bf16 --m 2048 --n 2048 --k 2048)
m1=$(measurements 1)
[[ $src == *MEASURED* && $m1 == 0 ]] \
  && record "tuned via daemon 0, served by daemon 1" ok "source $src, daemon 1 measured $m1 (tune $tune_time)" \
  || record "tuned via daemon 0, served by daemon 1" FAIL "source $src, daemon 1 measured $m1"

# 2. A force through daemon 1 is seen by daemon 0.
ctl 0 select --dtype bf16 --m 1024 --n 1024 --k 1024 >/dev/null  # measured and cached on daemon 0
t=$(now)
ctl 1 force --dtype bf16 --m 1024 --n 1024 --k 1024 --candidate cublas --reason fleet-run >/dev/null
seen=FAIL
for _ in $(seq 1 100); do
  [[ $(source_of 0 --dtype bf16 --m 1024 --n 1024 --k 1024) == *FORCED* ]] && { seen=ok; break; }
  sleep 0.05
done
record "force via daemon 1 seen by daemon 0" "$seen" "after $(since "$t") (polled every 50 ms)"

# 3. Daemon 0 holds the lease on a fresh bucket and is killed mid-measurement.
shape=(--dtype bf16 --m 8192 --n 8192 --k 8192)
ctl 0 select "${shape[@]}" >"$here/select0.log" 2>&1 &
sel0=$!
for _ in $(seq 1 600); do grep -q "measuring bf16 8192x8192x8192" "$out/daemon0.log" && break; sleep 0.05; done
ctl 1 --json select "${shape[@]}" >"$out/select1.json" 2>"$here/select1.err" &
sel1=$!
waited=no
for _ in $(seq 1 600); do
  grep -q "being measured by another daemon" "$out/daemon1.log" && { waited=yes; break; }
  sleep 0.05
done
still=$(grep -cF "verdict bf16 m(4096,8192]a8.n(4096,8192]a8.k(4096,8192]a8" "$out/daemon0.log" || true)
kill -9 "${pid[0]}"; t=$(now)
wait "$sel1"; rc1=$?
cat "$here/select1.err" >>"$out/steps.log" 2>/dev/null
wait "$sel0" 2>/dev/null
src=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("source","?"))' "$out/select1.json" 2>/dev/null || echo "?")
m1=$(measurements 1)
[[ $waited == yes && $still == 0 && $rc1 == 0 && $src == *MEASURED* && $m1 == 1 ]] \
  && record "lease holder killed, daemon 1 completes" ok "daemon 1 waited, then measured ($m1) in $(since "$t"); source $src" \
  || record "lease holder killed, daemon 1 completes" FAIL "waited=$waited holder-finished=$still rc=$rc1 source=$src measured=$m1"

echo
printf '%-44s %-6s %s\n' "step" "result" "detail"
printf '%s\n' "${results[@]}"
! printf '%s\n' "${results[@]}" | grep -q " FAIL "
FLEET
chmod +x "$out/fleet.sh"
echo "fleet-device: $(du -sh "$out/bundle.tar.xz" | cut -f1) in $out"
echo "run there (device tool): .device-fleet/fleet.sh   with carry [\".device-fleet\"]"
