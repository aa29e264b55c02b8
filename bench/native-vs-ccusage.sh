#!/bin/bash
# native-vs-ccusage.sh STORE_HOME CCUSAGE_BIN [RUNS] -- one run, same generated Claude store: wall time and max RSS of
# history/native's cold listing (no metadata cache; bench/nativelist) against ccusage reading the same files.
# Make the store with /work/shared/tools/gen-claude-store.py STORE_HOME /home/dev/project 1024 (outside the repo);
# get ccusage with `npm install ccusage@20.0.24` (20.0.26 lacks its linux-x64 binary) and pass
# node_modules/@ccusage/ccusage-linux-x64/bin/ccusage. Page cache warm (a first untimed pass reads everything).
set -euo pipefail
S=$1; CC=$2; N=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(mktemp -d)/nativelist
(cd "$ROOT" && go build -o "$BIN" ./bench/nativelist)
MB=$(find "$S" -name '*.jsonl' -printf '%s\n' | awk '{s+=$1} END{printf "%.1f", s/1e6}')
ENV="env -i PATH=/usr/bin:/bin HOME=$S CLAUDE_CONFIG_DIR=$S/.claude"
find "$S" -name '*.jsonl' -print0 | xargs -0 cat > /dev/null
measure() { # label, command...
  local label=$1; shift
  local walls=() rss=()
  for i in $(seq 1 "$N"); do
    local tf; tf=$(mktemp)
    /usr/bin/time -f '%e %M' -o "$tf" bash -c "$*" > /dev/null
    read -r w r < "$tf"; rm -f "$tf"
    walls+=("$w"); rss+=("$r")
  done
  local mw; mw=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  local mr; mr=$(printf '%s\n' "${rss[@]}" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  printf '%s\tmedian_wall=%ss\tMB/s=%s\tmaxRSS=%dMiB\truns=%s\n' "$label" "$mw" "$(awk -v m="$MB" -v w="$mw" 'BEGIN{printf "%.0f", m/w}')" $((mr/1024)) "$(IFS=,; echo "${walls[*]}")"
  echo "$mw" > "/tmp/nvc.$label"
}
echo "store $S: $MB MB"
measure native-P1 "GOMAXPROCS=1 $BIN -home $S"
measure native-P2 "GOMAXPROCS=2 $BIN -home $S"
measure ccusage-session "$ENV $CC session --json --offline"
measure ccusage-single-thread "$ENV $CC claude session --json --offline --single-thread"
awk -v a="$(cat /tmp/nvc.native-P2)" -v b="$(cat /tmp/nvc.ccusage-session)" 'BEGIN{printf "ratio native-P2 / ccusage-session (wall) = %.2f\n", a/b}'
awk -v a="$(cat /tmp/nvc.native-P1)" -v b="$(cat /tmp/nvc.ccusage-single-thread)" 'BEGIN{printf "ratio native-P1 / ccusage --single-thread (wall) = %.2f\n", a/b}'
