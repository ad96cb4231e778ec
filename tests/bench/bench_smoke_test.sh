#!/usr/bin/env bash
# arbiter-bench smoke: runs the tiny grid and a three-shape selection on the CPU
# backend into a temporary folder, then bench/plot.py on its CSV. Asserts what a
# reader of the results relies on (every file written, candidates timed after
# the oracle, the method recorded, plots drawn) and no timing.
set -euo pipefail
bench=$1 arbiterd=$2 python=$3 root=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bench" --help >/dev/null 2>&1 || fail "--help"
"$bench" --backend=cpu --grid=tiny --shapes="$root/tests/bench/smoke-shapes.txt" \
  --out="$out" --cpu_threads=1 --warmup=1 --min_samples=2 --max_samples=3 \
  --device_budget_s=0.01 --wall_budget_s=0.05 --peak_squares=64 --arbiterd="$arbiterd" --concurrency=1,2 \
  --service_seconds=0.2 --matmul_sizes=32,64 --matmul_repeats=2 --wire_mib=1 --zero_copy=on --service_staging_min_bytes=0 \
  --tuning_shapes=32x32x32:f32 --tuning_repeats=1 --quiet >"$out/stdout.txt" \
  || fail "arbiter-bench exited $?: $(tail -5 "$out/stdout.txt")"

for f in kernels.csv selection.csv transfer.csv service_rpc.csv service_matmul.csv tuning.csv \
    method.csv summary.csv README.md; do
  [[ -s $out/$f ]] || fail "$f not written"
done
# Every tiny-grid shape appears, and some candidate was timed at each.
for shape in "32,32,32" "64,64,64" "1,64,64" "8,64,64" "33,17,65"; do
  grep -q ",$shape,.*,timed," "$out/kernels.csv" || fail "kernels.csv: nothing timed at $shape"
done
# The three listed shapes each have a served candidate and a best.
(( $(tail -n +2 "$out/selection.csv" | wc -l) == 3 )) || fail "selection.csv: want 3 rows"
# Transfer: each bucket the list touches (40x48x64 and 64x48x64 share one) served at shapes it
# was not measured at, before and after refinement, each row with both regrets and the
# refinement's races; the summary carries the before/after lines.
"$python" - "$out/transfer.csv" <<'PY' || fail "transfer.csv: want rows with both regrets"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
served = {(r["measured_at"], r["served_at"]) for r in rows}
assert ("40x48x64", "64x48x64") in served, served           # the list's other shape of the bucket
assert ("40x48x64", "56x56x56") in served, served           # the bucket's middle
assert ("33x17x65", "63x31x127") in served, served          # the other bucket's high end
for r in rows:
    assert r["measured_at"] != r["served_at"], r
    assert float(r["regret_before"]) >= 1.0 and float(r["regret_after"]) >= 1.0, r
    assert int(r["refine_races"]) >= 1 and r["scope_after"], r
    # Round by round against the best, with the sign test's bounds around it.
    assert float(r["regret_after_low"]) <= float(r["regret_after_paired"]) <= float(r["regret_after_high"]), r
PY
grep -q "transfer: before refinement" "$out/summary.csv" || fail "summary: no transfer before line"
grep -q "transfer: after refinement, shapes within 1.03" "$out/summary.csv" \
  || fail "summary: no transfer after line"
for key in device date commit timer warmup repeats cold_cache peak_tflops copy_bandwidth_gbs shapes; do
  grep -q "^$key," "$out/method.csv" || fail "method.csv lacks $key"
done
grep -q "fnv1a64" "$out/method.csv" || fail "method.csv: shape list hash missing"
# Both transports, both RPCs, both concurrencies; Matmul at both sizes on both transports.
(( $(tail -n +2 "$out/service_rpc.csv" | wc -l) == 8 )) || fail "service_rpc.csv: want 8 rows"
# Then, on the unix socket at both sizes, the client library's staged calls, and host shared
# memory without and with the client's copies.
(( $(tail -n +2 "$out/service_matmul.csv" | wc -l) == 10 )) || fail "service_matmul.csv: want 10 rows"
grep -q "^unix,staged,f32,32," "$out/service_matmul.csv" || fail "service_matmul.csv: no staged row"
grep -q "^unix,host region,f32,64," "$out/service_matmul.csv" || fail "service_matmul.csv: no host region row"
grep -q "^unix,host region + client copies,f32,32," "$out/service_matmul.csv" \
  || fail "service_matmul.csv: no host region + client copies row"
(( $(tail -n +2 "$out/service_wire.csv" | wc -l) == 2 )) || fail "service_wire.csv: want 2 rows (1 MiB on tcp and unix)"
# The daemon's stage breakdown beside each row: its kernel stage is never blank.
head -1 "$out/service_matmul.csv" | grep -q "receive_s,prepare_s,lease_s,h2d_s,launch_s,kernel_s,d2h_s,send_s" \
  || fail "service_matmul.csv: no stage columns"
# Zero-copy on the unix socket (host shared memory here), at both sizes, C checked first.
(( $(tail -n +2 "$out/service_zero_copy.csv" | wc -l) == 2 )) || fail "service_zero_copy.csv: want 2 rows"
grep -q "^unix,zero-copy memfd," "$out/service_zero_copy.csv" || fail "service_zero_copy.csv: no memfd rows"
# Bytes-path rows have every device stage; zero-copy rows have the same stages but
# no copies, and the polling client's figures.
"$python" - "$out/service_matmul.csv" "$out/service_zero_copy.csv" <<'PY' \
  || fail "service stage columns: a row lacks a stage it must have (or has a copy it must not)"
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    # A host region on the CPU backend is its device memory: no copies there.
    copied = ("h2d_s", "d2h_s") if r["path"] == "bytes" else ()
    for stage in ("prepare_s", "lease_s", "launch_s", "kernel_s") + copied:
        assert r[stage] != "", (stage, r)
    assert float(r["e2e_vs_inprocess"]) > 0, r
    if r["path"] != "bytes":
        assert r["h2d_s"] == "" and r["d2h_s"] == "", r
for r in csv.DictReader(open(sys.argv[2])):
    for stage in ("prepare_s", "lease_s", "launch_s", "kernel_s", "send_s", "client_and_wire_s",
                  "polling_e2e_s", "polling_empty_rpc_p50_s", "polling_idle_empty_rpc_s"):
        assert r[stage] != "", (stage, r)
    assert r["h2d_s"] == "" and r["d2h_s"] == "", r
PY
(( $(tail -n +2 "$out/tuning.csv" | wc -l) == 1 )) || fail "tuning.csv: want 1 row"
grep -q "served / best" "$out/stdout.txt" || fail "summary missing on stdout"

"$python" "$root/bench/plot.py" "$out" >/dev/null || fail "plot.py failed"
for f in kernels_tflops.png kernels_vs_vendor.png kernels_squares.png selection_floor.png \
    service_e2e.png tuning_cost.png; do
  [[ -s $out/$f ]] || fail "plot.py wrote no $f"
done
echo "ok: bench smoke"
