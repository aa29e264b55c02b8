#!/bin/sh
# Runs the transcript package benchmarks behind docs/perf-transcript.md on one
# core. cpu-ms/op (process CPU time, GC included) is steadier than ns/op on a
# shared machine; the load average is printed so that figures can be judged.
# Extra arguments go to both go test runs.
set -eu
cd "$(dirname "$0")/.."
uptime
go test ./transcript -run '^$' -cpu 1 -benchtime "${DELTA_BENCHTIME:-2s}" \
	-bench 'ReducerContentDeltas|ApplyContentDeltas' "$@"
go test ./transcript -run '^$' -cpu 1 -benchtime "${BENCHTIME:-20x}" \
	-bench 'FlattenRegroup10k|Flatten10k|Regroup10k|ExportEvents10k|ValidateImport10k' "$@"
