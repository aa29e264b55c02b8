#!/bin/bash
# daemon.sh -- the daemon's figures (docs/perf-daemon.md): per-event overhead p50/p99 at 10,000 events/s,
# sustained throughput without loss or reordering (in-process agent and the ACP testagent), subscribe with
# 10,000 events buffered, `ochatd connect` → initialize answered, idle RSS. Prints the benchmark lines and
# the load average before and after (the figures move with machine load).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)  cores: $(nproc)"
go test ./daemon -run '^$' -bench 'EventLatency|Throughput|FloodACP' -benchtime 20000x | grep -E 'ns/op'
go test ./daemon -run '^$' -bench 'SubscribeReplay10k' -benchtime 20x | grep -E 'ns/op'
go test ./daemon -run '^$' -bench 'Emit' -benchtime 200000x | grep -E 'ns/op'
go test ./cmd/ochatd -run '^$' -bench 'ConnectInitialize|IdleRSS' -benchtime 20x | grep -E 'ns/op'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
