#!/bin/bash
# native-list.sh [STORE_HOME] [MB] [SESSIONS] -- listing throughput and RSS of history/native on a generated
# Claude Code store (default /tmp/nstore-200m, 200 MB, 400 sessions; generated if missing, never in the repo).
# Prints one JSON line per run: GOMAXPROCS=1 and 2, page cache warm, and (if allowed) cold after drop_caches.
set -euo pipefail
S=${1:-/tmp/nstore-200m}; MB=${2:-200}; N=${3:-400}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GEN=${GEN:-/work/shared/tools/gen-claude-store.py}
[ -d "$S/.claude" ] || python3 "$GEN" "$S" /home/dev/project "$MB" "$N" > /dev/null
BIN=$(mktemp -d)/nativelist
(cd "$ROOT" && go build -o "$BIN" ./bench/nativelist)
run() { # label, flags, env...
  local label=$1 flags=$2; shift 2
  local tf; tf=$(mktemp)
  local out; out=$(env "$@" /usr/bin/time -v "$BIN" -home "$S" $flags 2>"$tf" | tr -d '\n ')
  local rss; rss=$(awk -F': ' '/Maximum resident set size/{print $2}' "$tf")
  echo "{\"run\":\"$label\",\"maxRSSKiB\":$rss,\"result\":$out}"
  rm -f "$tf"
}
# listing only (its RSS is the listing's), then listing + full Read of every session
for p in 1 2; do
  for i in 1 2 3; do run "list-pagecache-warm-P$p-$i" "" GOMAXPROCS=$p; done
  run "list+read-P$p" "-read" GOMAXPROCS=$p
done
if sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
  run "list-pagecache-cold-P1" "" GOMAXPROCS=1
  sync && echo 3 > /proc/sys/vm/drop_caches
  run "list-pagecache-cold-P2" "" GOMAXPROCS=2
fi
