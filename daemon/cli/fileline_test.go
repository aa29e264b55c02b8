package cli

import (
	"testing"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

func TestFileLine(t *testing.T) {
	one, zero := 1, 0
	for _, tc := range []struct {
		status, want string
	}{
		{"", "[file] /w/a.txt +1 -0"},
		{"applied", "[file] /w/a.txt +1 -0 (applied)"},
		{daemon.FileRejected, "[file] /w/a.txt +1 -0 (not applied)"},
	} {
		got := fileLine(transcript.Segment{Type: transcript.SegFileChange, Path: "/w/a.txt", Additions: &one, Deletions: &zero, Status: tc.status})
		if got != tc.want {
			t.Errorf("status %q: %q, want %q", tc.status, got, tc.want)
		}
	}
}
