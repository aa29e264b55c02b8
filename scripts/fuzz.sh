#!/usr/bin/env bash
# Runs every `go test -fuzz` target in the module for a short, bounded time (FUZZTIME, default 3s each), on top
# of the committed seed corpora that plain `go test` already runs. A longer run: FUZZTIME=10m scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-3s}
n=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	echo "fuzz $pkg $name ($fuzztime)"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/ochat-fuzz.log 2>&1 || { cat /tmp/ochat-fuzz.log; exit 1; }
	n=$((n + 1))
done < <(grep -rEo --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)' . | sed -E 's/^\.\///; s/:func /:/' | sort -u)
echo "fuzz: $n targets ran for $fuzztime each, no failure"
