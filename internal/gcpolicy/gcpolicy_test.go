package gcpolicy

import (
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	oldPct, oldLim := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(oldPct); debug.SetMemoryLimit(oldLim) })
	for _, tc := range []struct {
		name    string
		env     map[string]string
		applied bool
		pct     int
		limit   int64
	}{
		{"defaults", nil, true, Percent, Limit},
		{"GOGC set by the user", map[string]string{"GOGC": "50"}, false, 100, 1 << 40},
		{"GOMEMLIMIT set by the user", map[string]string{"GOMEMLIMIT": "1GiB"}, false, 100, 1 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(1 << 40)
			got := Apply(func(k string) string { return tc.env[k] })
			pct := debug.SetGCPercent(100)
			lim := debug.SetMemoryLimit(-1)
			if got != tc.applied || pct != tc.pct || lim != tc.limit {
				t.Errorf("Apply = %v, GOGC %d, limit %d; want %v, %d, %d", got, pct, lim, tc.applied, tc.pct, tc.limit)
			}
		})
	}
}
