// Package gcpolicy sets the garbage collector of ochat's long-running
// process (ochatd serve) for its load. Listing native session stores
// allocates and drops a lot (several hundred MB per GB of session files)
// over a small live heap; with Go's default (collect when the heap has
// doubled) the collector then runs every few MB and costs a third of the
// listing's CPU. A higher GOGC under a soft memory limit collects less
// often while keeping the process under the limit (docs/perf-history.md).
package gcpolicy

import "runtime/debug"

const (
	// Percent is GOGC: collect when the heap has grown by 400 %.
	Percent = 400
	// Limit is the soft memory limit (GOMEMLIMIT) that caps what Percent
	// allows: past it the collector runs as often as it must.
	Limit = 72 << 20
)

// Apply sets Percent and Limit unless the environment sets GOGC or
// GOMEMLIMIT (then the user's choice stands). It reports whether it did.
func Apply(getenv func(string) string) bool {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return false
	}
	debug.SetGCPercent(Percent)
	debug.SetMemoryLimit(Limit)
	return true
}
