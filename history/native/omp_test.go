package native

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListOmp: an Oh My Pi session (pi's format under ~/.omp, omp's own
// folder naming) is listed and read for its workspace as agent "omp"; one
// of another cwd in a folder of a similar name is not.
func TestListOmp(t *testing.T) {
	home := t.TempDir()
	ws := filepath.Join(t.TempDir(), "a-b")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	ws = cleanAbs(ws)
	trap, _ := os.ReadFile(piTrap)
	for _, tt := range []struct{ folder, cwd, name string }{
		{"-tmp-a-b", ws, filepath.Base(piTrap)},                                                     // omp's temp-dir form
		{"--x-a-b--", strings.Replace(ws, "a-b", "a/b", 1), "2026-04-01T00-00-00-000Z_other.jsonl"}, // other cwd
	} {
		writeFile(t, filepath.Join(home, ".omp", "agent", "sessions", tt.folder, tt.name), []byte(strings.ReplaceAll(string(trap), "/w/a-b", tt.cwd)))
	}
	ss, _ := List(context.Background(), Env{Home: home}, ws)
	if len(ss) != 1 || ss[0].Agent != AgentOmp || ss[0].Title != "Named by user" {
		t.Fatalf("omp sessions = %+v", ss)
	}
	tr, err := Read(context.Background(), Env{Home: home}, "7a000000-0000-4000-8000-000000000001")
	if err != nil || tr.Cwd != ws || tr.Agent != AgentOmp {
		t.Errorf("read by id: %+v, %v", tr, err)
	}
	if got := ResumeCommand(AgentOmp, ss[0].ID, ss[0].Path); strings.Join(got, " ") != "omp --session "+ss[0].Path {
		t.Errorf("resume command %v", got)
	}
}
