package cli

import (
	"reflect"
	"testing"
)

func TestWorkspaceFirst(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{[]string{"--workspace", "/w", "chat", "hi"}, []string{"chat", "--workspace", "/w", "hi"}},
		{[]string{"-workspace", "/w", "agents"}, []string{"agents", "-workspace", "/w"}},
		{[]string{"--workspace=/w", "show", "ID"}, []string{"show", "--workspace=/w", "ID"}},
		{[]string{"chat", "--workspace", "/w", "hi"}, []string{"chat", "--workspace", "/w", "hi"}},
		{[]string{"--workspace", "/w"}, []string{"--workspace", "/w"}},
		{nil, nil},
	} {
		if got := workspaceFirst(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("workspaceFirst(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 lines", 1: "1 line", 2: "2 lines"} {
		if got := plural(n, "line", "lines"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
