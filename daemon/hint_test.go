package daemon

import (
	"strings"
	"testing"
)

func TestWithHint(t *testing.T) {
	for _, tc := range []struct {
		agent, msg, want string
	}{
		{"codex", "session/new: Authentication required (code -32000)", "codex login"},
		{"claude", "session/new failed: Internal error: Query closed before response received", "log in"},
		{"test", "session/new: Authentication required (code -32000)", ""},
		{"codex", "agent codex exited (exit status 3)", ""},
	} {
		got := withHint(tc.agent, tc.msg)
		if !strings.HasPrefix(got, tc.msg) {
			t.Errorf("withHint(%q, %q) = %q: lost the message", tc.agent, tc.msg, got)
		}
		if tc.want == "" && got != tc.msg {
			t.Errorf("withHint(%q, %q) = %q, want it unchanged", tc.agent, tc.msg, got)
		}
		if tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("withHint(%q, %q) = %q, want a hint with %q", tc.agent, tc.msg, got, tc.want)
		}
		if again := withHint(tc.agent, got); again != got {
			t.Errorf("hint added twice: %q", again)
		}
	}
}
