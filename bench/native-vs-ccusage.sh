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
# The four commands run interleaved, one round at a time (the machine is shared: load shifts within minutes), and
# each gets the median of its N runs; the ratio is ochat's wall time over ccusage's (below 0.5 = over 2x faster).
declare -A WALLS RSS
LABELS=(native-P2 ccusage-session native-P1 ccusage-single-thread)
declare -A CMD=(
  [native-P2]="GOMAXPROCS=2 $BIN -home $S"
  [ccusage-session]="$ENV $CC session --json --offline"
  [native-P1]="GOMAXPROCS=1 $BIN -home $S"
  [ccusage-single-thread]="$ENV $CC claude session --json --offline --single-thread"
)
echo "store $S: $MB MB; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$N"); do
  for label in "${LABELS[@]}"; do
    tf=$(mktemp)
    /usr/bin/time -f '%e %M' -o "$tf" bash -c "${CMD[$label]}" > /dev/null
    read -r w r < "$tf"; rm -f "$tf"
    WALLS[$label]+="$w "; RSS[$label]+="$r "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
for label in "${LABELS[@]}"; do
  mw=$(echo "${WALLS[$label]}" | median); mr=$(echo "${RSS[$label]}" | median)
  printf '%s\tmedian_wall=%ss\tMB/s=%s\tmaxRSS=%dMiB\truns=%s\n' "$label" "$mw" "$(awk -v m="$MB" -v w="$mw" 'BEGIN{printf "%.0f", m/w}')" $((mr/1024)) "${WALLS[$label]}"
  echo "$mw" > "/tmp/nvc.$label"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v a="$(cat /tmp/nvc.native-P2)" -v b="$(cat /tmp/nvc.ccusage-session)" 'BEGIN{printf "ratio native-P2 / ccusage-session (wall) = %.2f\n", a/b}'
awk -v a="$(cat /tmp/nvc.native-P1)" -v b="$(cat /tmp/nvc.ccusage-single-thread)" 'BEGIN{printf "ratio native-P1 / ccusage --single-thread (wall) = %.2f\n", a/b}'
