package native

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const piTrap = "testdata/pi/traps/2026-04-01T00-00-00-000Z_7a000000-0000-4000-8000-000000000001.jsonl"

func readPiT(t *testing.T, path string) *Transcript {
	t.Helper()
	tr, err := ReadPi(path)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, tr)
	return tr
}

func TestPiActiveBranch(t *testing.T) {
	tr := readPiT(t, piTrap)
	eqShape(t, shape(tr), []string{
		"u:Edit the file",
		"a:reasoning(ok) tool(edit,completed) fc(x.ts,+2,-1) tool(write,completed) fc(new.ts,+2,-0) tool(bash,error) content(Kept answer) tool(bash,completed)",
	})
	if tr.Title != "Named by user" || tr.Cwd != "/w/a-b" || tr.Model != "claude-x" || tr.Diagnostics.SkippedLines != 1 {
		t.Errorf("meta = %+v", tr.Session)
	}
	if len(tr.Markers) != 1 || tr.Markers[0].Kind != "notice" {
		t.Errorf("markers = %+v", tr.Markers)
	}
	if tr.Resume[0] != "pi" || tr.Resume[2] != piTrap {
		t.Errorf("resume = %v", tr.Resume)
	}
}

func TestPiPublic(t *testing.T) {
	v1 := readPiT(t, "testdata/pi/public/pi-mono__large-session.jsonl")
	fcs := 0
	for _, m := range v1.Messages {
		for _, s := range m.Segments {
			if s.Type == "fileChange" {
				fcs++
				if s.Path == "" || s.Additions == nil {
					t.Errorf("fileChange = %+v", s)
				}
			}
		}
	}
	if fcs == 0 || v1.MessageCount < 100 {
		t.Errorf("v1 session: %d fileChanges, %d messages", fcs, v1.MessageCount)
	}
	v3 := readPiT(t, "testdata/pi/public/agent-sessions__stage0__small.jsonl")
	if len(v3.Messages) != 4 || len(v3.Markers) != 2 || v3.Markers[0].Kind != "compaction" {
		t.Errorf("v3 = %v markers %+v", shape(v3), v3.Markers)
	}
}

func TestListPi(t *testing.T) {
	home := t.TempDir()
	ws := filepath.Join(t.TempDir(), "a-b")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	ws = cleanAbs(ws)
	trap, _ := os.ReadFile(piTrap)
	dir := filepath.Join(home, ".pi", "agent", "sessions", PiDirName(ws))
	writeFile(t, filepath.Join(dir, filepath.Base(piTrap)), []byte(strings.ReplaceAll(string(trap), "/w/a-b", ws)))
	// same folder name, other cwd (/…/a/b): excluded
	writeFile(t, filepath.Join(dir, "2026-04-01T00-00-00-000Z_other.jsonl"), []byte(strings.ReplaceAll(string(trap), "/w/a-b", strings.Replace(ws, "a-b", "a/b", 1))))
	ss, _ := List(context.Background(), Env{Home: home}, ws)
	if len(ss) != 1 || ss[0].Title != "Named by user" {
		t.Errorf("pi sessions = %+v", ss)
	}
	if tr, err := Read(context.Background(), Env{Home: home}, "7a000000-0000-4000-8000-000000000001"); err != nil || tr.Cwd != ws {
		t.Errorf("read by id: %v", err)
	}
}
