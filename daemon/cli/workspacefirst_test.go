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
