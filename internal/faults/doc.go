// Package faults holds ochat's fault-injection tests (issue 8, "Faults to
// survive"): they run the real daemon — the ochatd binary as a child process
// with private XDG folders, or daemon.Server in process where a knob is only
// reachable from Go — against real agent processes (the scripted
// internal/testagent, and small misbehaving ACP agents played by this test
// binary itself), inject the faults users meet (SIGKILL of the daemon, agents
// that crash, hang, flood or send garbage, editors that vanish, stall or send
// malformed frames, native session stores that are deleted, rewritten or
// flooded) and check that nothing is lost and everything keeps working. It
// also holds the fuzz targets for the params of every ochat/… method and the
// soak test; docs/reliability.md lists every fault and the measured figures.
//
// Short versions of every test always run with `go test ./internal/faults/`;
// OCHAT_LONG=1 runs the long loops (50+ kills, 1,000-turn soak).
//
// The package has no exported API and is imported by nothing: it never
// changes the code it tests, and it reads and writes only its own temporary
// folders.
package faults
