#!/usr/bin/env bash
# A real Prometheus server (Debian's prometheus package) scrapes a live arbiterd
# and per-candidate series are read back through its query API.
#
# Usage: prometheus_test.sh PATH/TO/arbiterd PATH/TO/arbiterctl
#
# Starts arbiterd (CPU backend, temp store, ephemeral gRPC port, /metrics on a
# free port), runs dispatches through arbiterctl, checks a curl'd scrape with
# scripts/check-deploy.sh (promtool check metrics; every metric the alert rules
# and the dashboard use is present), then starts prometheus with a 1 s scrape
# interval and deploy/prometheus/alerts.yml loaded, and polls
# /api/v1/query until the kernel-time and relative-error series of a candidate
# appear (bounded waits). Prints "N passed, N failed" last. Exits 77 (skipped)
# when arbiterd has no --metrics-listen flag yet or prometheus is missing.
set -uo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 PATH/TO/arbiterd PATH/TO/arbiterctl" >&2
  exit 2
fi
arbiterd=$(realpath "$1")
arbiterctl=$(realpath "$2")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

for tool in prometheus curl python3; do
  command -v "$tool" >/dev/null || { echo "skip: $tool is not installed"; exit 77; }
done
help=$("$arbiterd" --helpfull 2>&1 || true)
if [[ $help != *metrics_listen* ]]; then
  echo "skip: arbiterd has no --metrics-listen flag"
  exit 77
fi

work=$(mktemp -d -t arbiter-prom-XXXXXX)
daemon_pid=""
prom_pid=""
cleanup() {
  # Only the processes this script started, by their ids.
  [[ -n $prom_pid ]] && kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
  [[ -n $daemon_pid ]] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
pass() { echo "ok    $1"; passed=$((passed + 1)); }
fail() {
  echo "FAIL  $1"
  [[ $# -ge 2 && -f $2 ]] && tail -n 30 "$2" | sed 's/^/      /'
  failed=$((failed + 1))
}
finish() {
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]] && exit 0 || exit 1
}

# A port the kernel says is free now (prometheus and civetweb cannot report an
# ephemeral one back; a clash between here and the bind fails the test loudly).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for SECONDS COMMAND...: retries COMMAND until it succeeds or time runs out.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS >= deadline)) && return 1
    sleep 0.5
  done
}

# --- arbiterd ----------------------------------------------------------------
metrics_port=$(free_port)
"$arbiterd" --listen=127.0.0.1:0 --port-file="$work/port" --backend=cpu --store="$work/verdicts.db" \
  --metrics-listen="127.0.0.1:$metrics_port" >"$work/arbiterd.log" 2>&1 &
daemon_pid=$!
if ! wait_for 120 test -s "$work/port"; then
  fail "arbiterd serves (no port file in 120 s)" "$work/arbiterd.log"
  finish
fi
server=127.0.0.1:$(cat "$work/port")
ctl() { "$arbiterctl" --server "$server" --timeout 120 "$@" >>"$work/arbiterctl.log" 2>&1; }

if ctl health && ctl matmul --m 64 --n 48 --k 40 --dtype f32 && ctl matmul --m 13 --n 7 --k 29 --dtype f64 &&
  ctl matmul --m 64 --n 48 --k 40 --dtype f32 && ctl select --m 64 --n 48 --k 40 --dtype f32; then
  pass "dispatches through arbiterctl"
else
  fail "dispatches through arbiterctl" "$work/arbiterctl.log"
fi

# --- the scrape --------------------------------------------------------------
if curl -fsS "http://127.0.0.1:$metrics_port/metrics" -o "$work/scrape.txt"; then
  pass "GET /metrics"
else
  fail "GET /metrics" "$work/arbiterd.log"
fi
if grep -qE '^arbiter_kernel_seconds_count\{candidate="[^"]+",dtype="f32"\} [1-9]' "$work/scrape.txt"; then
  pass "the scrape counts the f32 dispatches under their candidate"
else
  fail "the scrape counts the f32 dispatches under their candidate" "$work/scrape.txt"
fi
if "$root/scripts/check-deploy.sh" "$work/scrape.txt" >"$work/check-deploy.log" 2>&1; then
  pass "scripts/check-deploy.sh with the live scrape"
else
  fail "scripts/check-deploy.sh with the live scrape" "$work/check-deploy.log"
fi

# --- prometheus --------------------------------------------------------------
prom_port=$(free_port)
cp "$root/deploy/prometheus/alerts.yml" "$work/alerts.yml"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - alerts.yml
scrape_configs:
  - job_name: arbiter
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
if wait_for 60 curl -fs -o /dev/null "http://127.0.0.1:$prom_port/-/ready"; then
  pass "prometheus is ready"
else
  fail "prometheus is ready" "$work/prometheus.log"
  finish
fi

# query PROMQL: prints the distinct candidate labels of the result's series.
query_candidates() {
  curl -fsS "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json, sys
r = json.load(sys.stdin)
assert r["status"] == "success", r
print(" ".join(sorted({s["metric"].get("candidate", "") for s in r["data"]["result"]} - {""})))'
}
# has_series PROMQL: true once the query returns a series with a candidate label.
has_series() { [[ -n $(query_candidates "$1" 2>/dev/null) ]]; }

expr='arbiter_kernel_seconds_count{job="arbiter",dtype="f32"} > 0'
if wait_for 60 has_series "$expr"; then
  pass "per-candidate kernel-time series via the query API ($(query_candidates "$expr"))"
else
  fail "per-candidate kernel-time series via the query API: nothing for $expr in 60 s" "$work/prometheus.log"
fi
expr='histogram_quantile(0.5, sum by (le, candidate) (rate(arbiter_kernel_seconds_bucket{job="arbiter"}[1m])))'
if wait_for 60 has_series "$expr"; then
  pass "per-candidate latency quantile via the query API"
else
  fail "per-candidate latency quantile via the query API: nothing for $expr in 60 s" "$work/prometheus.log"
fi
expr='arbiter_candidate_relative_error{job="arbiter",origin="tuning"}'
if wait_for 60 has_series "$expr"; then
  pass "per-candidate relative-error series via the query API ($(query_candidates "$expr"))"
else
  fail "per-candidate relative-error series via the query API: nothing for $expr in 60 s" "$work/prometheus.log"
fi
rules=$(curl -fsS "http://127.0.0.1:$prom_port/api/v1/rules" |
  python3 -c 'import json, sys; print(sum(len(g["rules"]) for g in json.load(sys.stdin)["data"]["groups"]))')
if [[ ${rules:-0} -gt 0 ]]; then
  pass "prometheus loaded the $rules alert rules of deploy/prometheus/alerts.yml"
else
  fail "prometheus loaded the alert rules of deploy/prometheus/alerts.yml" "$work/prometheus.log"
fi

finish
