// Package procguard makes sure no agent process outlives the daemon that
// started it, even after `kill -9` of the daemon.
//
// Three layers, each covering what the one before cannot:
//
//   - Every agent runs in its own process group, started from a goroutine
//     locked to its OS thread with Pdeathsig set (SpawnLocked). Pdeathsig
//     is per thread in Linux: it fires when the thread that forked the
//     child ends, not the process, so the thread stays locked (and alive)
//     until the child is reaped; Go never ends a thread that is locked and
//     still running its goroutine.
//   - ochatd runs each agent under a small re-exec shim (`ochatd
//     __agent-shim -- CMD ARGS`, RunShim), the leader of the group. Its
//     Pdeathsig is SIGTERM and it also watches getppid: when the daemon is
//     gone it SIGKILLs the whole group (the adapter and its children, e.g.
//     the `claude` CLI under claude-agent-acp), which Pdeathsig alone would
//     not reach.
//   - A Ledger beside the store records the group of every agent the
//     daemon started (pid, process start time); the next daemon Sweeps what
//     a dead one left, killing a group only when its leader's start time
//     still matches, so a recycled pid is never hit.
package procguard
