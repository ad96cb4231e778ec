#!/usr/bin/env bash
# Checks the files in deploy/:
#   - promtool check config / check rules / test rules on deploy/prometheus
#   - yamllint on deploy/ (deploy/.yamllint)
#   - the Grafana dashboard is JSON, and each of its queries is valid PromQL
#   - the systemd unit passes systemd-analyze verify (where systemd-analyze exists)
# and, given a scrape of a live arbiterd's /metrics (a file, or "-" for stdin):
#   - promtool check metrics passes on it
#   - every arbiter_* metric the alert rules and the dashboard use is in it
#     (histograms by their _bucket/_sum/_count series)
#
# Usage: scripts/check-deploy.sh [SCRAPE_FILE]
# Needs: promtool (Debian's prometheus package), yamllint, python3.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deploy=$root/deploy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
# check NAME COMMAND...: runs COMMAND quietly; on failure shows what it printed.
check() {
  local name=$1
  shift
  if "$@" >"$work/out" 2>&1; then
    echo "ok    $name"
    passed=$((passed + 1))
  else
    echo "FAIL  $name"
    sed 's/^/      /' "$work/out"
    failed=$((failed + 1))
  fi
}

for tool in promtool yamllint python3; do
  command -v "$tool" >/dev/null || { echo "check-deploy: $tool is not installed" >&2; exit 2; }
done

# --- Prometheus configuration and rules -------------------------------------
check "promtool check config deploy/prometheus/prometheus.yml" \
  promtool check config "$deploy/prometheus/prometheus.yml"
check "promtool check rules deploy/prometheus/alerts.yml" \
  promtool check rules "$deploy/prometheus/alerts.yml"
# Paths in a rule test resolve against the working directory.
check "promtool test rules deploy/prometheus/alerts_test.yml" \
  bash -c 'cd "$1" && promtool test rules alerts_test.yml' _ "$deploy/prometheus"

# --- YAML --------------------------------------------------------------------
check "yamllint deploy/" \
  bash -c 'cd "$1" && yamllint --strict -c .yamllint .' _ "$deploy"

# --- Grafana dashboard -------------------------------------------------------
dashboard=$deploy/grafana/arbiter.json
# Each panel query, with Grafana's variables given values, becomes a recording
# rule so promtool parses it as PromQL.
dashboard_rules() {
  python3 - "$dashboard" <<'EOF'
import json, sys
dash = json.load(open(sys.argv[1]))
exprs = []
def walk(panels):
    for p in panels:
        exprs.extend(t["expr"] for t in p.get("targets", []) if t.get("expr"))
        walk(p.get("panels", []))
walk(dash["panels"])
if not exprs:
    sys.exit("no queries in the dashboard")
print("groups:\n  - name: dashboard\n    rules:")
for i, e in enumerate(exprs):
    for var, value in (("$__rate_interval", "5m"), ("$__interval", "1m"), ("$instance", ".*"), ("$candidate", ".*")):
        e = e.replace(var, value)
    print(f"      - record: dashboard_query_{i}\n        expr: {json.dumps(e)}")
EOF
}
check "deploy/grafana/arbiter.json is JSON" python3 -m json.tool "$dashboard"
if dashboard_rules >"$work/dashboard-rules.yml" 2>"$work/dashboard-err"; then
  check "dashboard queries parse as PromQL" promtool check rules "$work/dashboard-rules.yml"
else
  echo "FAIL  dashboard queries parse as PromQL"
  sed 's/^/      /' "$work/dashboard-err"
  failed=$((failed + 1))
fi

# --- systemd -----------------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
  # The binary is not installed here: verify the unit with a stand-in for it.
  sed 's|/usr/local/bin/arbiterd|/bin/true|' "$deploy/systemd/arbiterd.service" >"$work/arbiterd.service"
  check "systemd-analyze verify deploy/systemd/arbiterd.service" \
    bash -c 'out=$(systemd-analyze verify "$1" 2>&1); echo "$out"; [[ -z $out ]]' _ "$work/arbiterd.service"
else
  echo "skip  systemd-analyze verify (systemd-analyze not installed)"
fi

# --- a live scrape -----------------------------------------------------------
if [[ $# -ge 1 ]]; then
  scrape=$work/scrape.txt
  if [[ $1 == - ]]; then cat >"$scrape"; else cp "$1" "$scrape"; fi
  check "promtool check metrics on the scrape" bash -c 'promtool check metrics < "$1"' _ "$scrape"

  # Names the rules and the dashboard use.
  grep -ohE 'arbiter_[a-zA-Z0-9_]+' "$deploy/prometheus/alerts.yml" "$dashboard" | sort -u >"$work/used"
  # Names the scrape has: every sample's name, and every family's (a
  # histogram's base name, for a query that names it).
  { grep -vE '^#|^$' "$scrape" | sed -E 's/^([a-zA-Z_:][a-zA-Z0-9_:]*).*/\1/'
    sed -nE 's/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) .*/\1/p' "$scrape"; } | sort -u >"$work/present"
  missing=$(comm -23 "$work/used" "$work/present")
  if [[ -z $missing ]]; then
    echo "ok    all $(wc -l <"$work/used") arbiter_* metrics used by alerts.yml and arbiter.json are in the scrape"
    passed=$((passed + 1))
  else
    echo "FAIL  metrics used by alerts.yml or arbiter.json but absent from the scrape:"
    echo "$missing" | sed 's/^/      /'
    failed=$((failed + 1))
  fi
else
  echo "skip  scrape checks (pass a scrape of arbiterd's /metrics to run them)"
fi

echo "check-deploy: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
