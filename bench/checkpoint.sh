#!/bin/bash
# checkpoint.sh [WS] [FILES] [MB] -- code checkpoint figures (docs/checkpoints.md): generates a workspace
# (default /tmp/ckpt-ws, 20,000 files, 500 MB; never in the repo), then the first checkpoint into a fresh
# shadow repository and three later ones after 100 changed files each, one JSON line per run with the
# wall time and the process's max RSS (KiB, from /usr/bin/time -v; the process opens the store, reads the
# stat cache, walks and checkpoints). The page cache is warm (the workspace was just written or read).
set -euo pipefail
WS=${1:-/tmp/ckpt-ws}; FILES=${2:-20000}; MB=${3:-500}
STATE=$(mktemp -d)/checkpoints
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(mktemp -d)/ckptbench
(cd "$ROOT" && go build -o "$BIN" ./bench/ckptbench)
[ -d "$WS" ] || "$BIN" -gen -ws "$WS" -files "$FILES" -mb "$MB"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)  cores: $(nproc)  workspace: $(du -sh "$WS" | cut -f1)"
run() {
  local tf; tf=$(mktemp)
  local out; out=$(/usr/bin/time -v "$BIN" -ws "$WS" -dir "$STATE" "$@" 2>"$tf")
  local rss; rss=$(awk -F': ' '/Maximum resident set size/{print $2}' "$tf")
  echo "{\"maxRSSKiB\":$rss,\"result\":$out}"
  rm -f "$tf"
}
run -mode first
for i in 1 2 3; do run -mode later -changed 100; done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$(dirname "$STATE")"
