#!/usr/bin/env bash
# Measures the real ACP adapters offline: npm install time of the pinned
# adapters (cold: empty npm cache and empty ochat cache; npm-warm: npm's own
# cache filled, ochat cache empty; warm: reused from the ochat cache) and
# per-turn latency of claude-agent-acp and codex-acp against the fake model,
# directly over ACP and through an ochatd daemon. Needs node + npm and the
# npm registry for the cold run. Figures go to stdout as min/median/max.
#
#   bench/real-agents.sh            # RUNS=3 latency runs
#   RUNS=5 bench/real-agents.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go test -c -o "$tmp/e2e.test" ./internal/e2e
tests='TestAdapterDirect'
if [ -n "${OCHAT_E2E_OCHATD:-}" ]; then
	tests='TestAdapterDirect|TestDaemon'
elif go build -o "$tmp/ochatd" ./cmd/ochatd 2>/dev/null; then
	export OCHAT_E2E_OCHATD="$tmp/ochatd"
	tests='TestAdapterDirect|TestDaemon|TestDemo'
else
	echo "note: ./cmd/ochatd does not build; measuring the direct ACP path only" >&2
fi
export OCHAT_E2E=1
# run executes the e2e tests matching $1 and prints their metric lines; a
# failed run is reported on stderr and contributes no figures.
run() {
	local out="$tmp/run.log"
	if ! (cd internal/e2e && "$tmp/e2e.test" -test.v -test.count=1 -test.run "$1" >"$out" 2>&1); then
		echo "run of $1 FAILED:" >&2
		grep -E -- '--- FAIL|_test.go' "$out" | head -20 >&2
		return 0
	fi
	grep 'metric:' "$out" | sed 's/.*metric: //'
}

echo "== install (cold: empty npm cache + empty ochat cache)"
OCHAT_CACHE="$tmp/cold" npm_config_cache="$tmp/npm-cold" run 'TestAdapterDirect/codex' | grep install
echo "== install (npm cache warm, ochat cache empty)"
OCHAT_CACHE="$tmp/npmwarm" run 'TestAdapterDirect/codex' | grep install
echo "== install (warm: reused from the ochat cache)"
OCHAT_CACHE="$tmp/cold" run 'TestAdapterDirect/codex' | grep install

if [ -n "${OCHAT_E2E_OCHATD:-}" ]; then
	echo "== ochatd demo --yes: codex-acp install (cold npm cache, then reused) and the whole tour"
	for c in cold reused; do
		start=$(date +%s%N)
		(cd "$tmp" && OCHAT_CACHE="$tmp/demo" npm_config_cache="$tmp/npm-demo" "$OCHAT_E2E_OCHATD" demo --yes </dev/null 2>&1) |
			grep -E 'installed in|reused the cached' | sed "s/^ */$c: /"
		echo "$c: whole demo $(( ($(date +%s%N) - start) / 1000000 )) ms"
	done
fi

echo "== per-turn latency, $runs runs (warm cache)"
for i in $(seq "$runs"); do
	OCHAT_CACHE="$tmp/cold" run "$tests" | grep -v install
done | awk '
	{ v=$NF; name=$0; sub(/ [^ ]+$/, "", name); ms=v
	  if (v ~ /ms$/) { sub(/ms$/, "", ms) } else if (v ~ /µs$/) { sub(/µs$/, "", ms); ms/=1000 } else if (v ~ /s$/) { sub(/s$/, "", ms); ms*=1000 }
	  printf "%s\t%.1f\n", name, ms }' | sort -t "$(printf '\t')" -k1,1 -k2,2n | awk -F '\t' '
	function flush() { if (n) printf "%-48s min %6.0f ms  median %6.0f ms  max %6.0f ms  (n=%d)\n", cur, v[1], v[int((n+1)/2)], v[n], n }
	$1 != cur { flush(); cur=$1; n=0 }
	{ v[++n]=$2 }
	END { flush() }'
