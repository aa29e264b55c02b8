package agents

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

// TestCancelFence reproduces claude-agent-acp 0.23's shifted answers after
// a cancel (TESTAGENT_CANCEL_SHIFT, shared/cases/claude-cancel-shift) and
// checks that every turn after the cancel holds its own answer: the write
// turn shows its permission and writes the file, and two more turns stay
// aligned. Without the shift the same sequence must behave the same.
func TestCancelFence(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
	}{
		{"shifting agent", map[string]string{"TESTAGENT_CANCEL_SHIFT": "1"}},
		{"well-behaved agent", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := start(t, tt.env, nil)
			info := f.session(t)
			sid := info.ID
			mark := 0
			turnText := func() string {
				evs := f.rec.eventsOf(sid)
				s := text(evs[mark:], transcript.EvContentDelta)
				mark = len(evs)
				return s
			}
			go func() {
				f.rec.waitFor(t, "first chunk", func() bool { return len(f.rec.eventsOf(sid)) > 0 })
				f.conn.Cancel(context.Background(), sid)
			}()
			if stop := f.prompt(t, sid, "SLOW 200"); stop != "cancelled" {
				t.Fatalf("slow turn: stop %q", stop)
			}
			turnText()

			if stop := f.prompt(t, sid, `WRITE after.txt hello`); stop != "end_turn" {
				t.Fatalf("write turn: stop %q", stop)
			}
			if len(f.rec.perms) != 1 {
				t.Errorf("write turn: %d permission requests shown, want 1", len(f.rec.perms))
			}
			if b, err := os.ReadFile(filepath.Join(f.ws, "after.txt")); err != nil || string(b) != "hello" {
				t.Errorf("file after the write turn: %q, %v", b, err)
			}
			turnText()
			for _, p := range []string{"PLAIN hi there", "PLAIN second", "PLAIN third"} {
				if stop := f.prompt(t, sid, p); stop != "end_turn" {
					t.Fatalf("%s: stop %q", p, stop)
				}
				want := strings.TrimPrefix(p, "PLAIN ")
				if got := turnText(); got != want {
					t.Errorf("turn %q answered %q, want %q", p, got, want)
				}
			}
		})
	}
}
