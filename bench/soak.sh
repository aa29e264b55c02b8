#!/bin/sh
# bench/soak.sh prints the soak figures of docs/reliability.md: 1,000 prompt
# turns through one daemon with the scripted testagent, 10 conversations
# streaming at once — once through an `ochatd serve` child (RSS and open fds
# after warm-up and at the end) and once through daemon.Server in the test
# process (goroutines, fds, heap). SOAK_SHORT=1 runs the 100-turn version.
set -eu
cd "$(dirname "$0")/.."
if [ "${SOAK_SHORT:-}" = 1 ]; then long=0; else long=1; fi
OCHAT_LONG=$long go test ./internal/faults/ -run '^TestSoak' -count=1 -v -timeout 30m |
	grep -E 'figure:|^(--- |ok|FAIL|PASS)'
