package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/internal/fakemodel"
	"github.com/ochat-dev/ochat/transcript"
)

// TestCancelThenWrite is shared/cases/claude-cancel-shift against each real
// adapter through a real daemon: SLOW → cancel → WRITE_FILE (its
// permission shown, the file written, "Done: created …") → "just say hi"
// (PONG) → two more turns, each holding its own answer, live and stored.
// claude-agent-acp 0.23 answers the prompt after a cancel with the
// cancelled turn's stale idle (agentclientprotocol/claude-agent-acp#551);
// agents.Conn fences it.
func TestCancelThenWrite(t *testing.T) {
	need(t)
	in := adapters(t)
	ochatd(t)
	for _, name := range []string{"claude", "codex"} {
		t.Run(name, func(t *testing.T) {
			root := realpath(t, t.TempDir())
			ws := filepath.Join(root, "work")
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			s := fakeModel(t)
			a := setupAgent(t, name, s, in, root)
			d := newDaemonEnv(t, []agentSetup{a}, root, ws)
			d.start()
			defer d.stop()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			c := d.client(ctx)
			defer c.Close()

			cancelled := false
			var conv string
			t1 := runTurn(ctx, t, c, "", name, "SLOW: take your time", a.allowKind, func(tr *turn, ev transcript.Event) {
				if !cancelled && strings.Contains(tr.text, "Thinking") {
					cancelled = true
					var r daemon.CancelResult
					if err := c.Call(ctx, daemon.MethodChatCancel, daemon.ConversationParams{ConversationID: tr.send.ConversationID}, &r); err != nil || !r.Cancelled {
						t.Errorf("chat/cancel: %+v, %v", r, err)
					}
				}
			})
			conv = t1.send.ConversationID
			if f := t1.final(); !cancelled || f.StopReason != "cancelled" {
				t.Fatalf("slow turn: cancelled=%v, ended with %+v", cancelled, f)
			}

			target := filepath.Join(ws, "after.txt")
			start := time.Now()
			t2 := runTurn(ctx, t, c, conv, name, "WRITE_FILE "+target, a.allowKind, nil)
			metric(t, name+" write turn after a cancel", time.Since(start))
			if f := t2.final(); f.Type != transcript.EvTurnCompleted || f.StopReason != "end_turn" {
				t.Fatalf("write turn ended with %+v", f)
			}
			if len(t2.perms) != 1 {
				t.Errorf("write turn: %d permission requests shown, want 1", len(t2.perms))
			}
			if !strings.Contains(t2.text, "Done: created "+target) {
				t.Errorf("write turn text %q", t2.text)
			}
			if b, err := os.ReadFile(target); err != nil || string(b) != fakemodel.FileContent {
				t.Errorf("file on disk: %q, %v", b, err)
			}
			turns := []*turn{t1, t2}
			for _, p := range []string{"just say hi", "PLAIN: second after", "PLAIN: third after"} {
				tr := runTurn(ctx, t, c, conv, name, p, a.allowKind, nil)
				turns = append(turns, tr)
				if f := tr.final(); f.Type != transcript.EvTurnCompleted || f.StopReason != "end_turn" {
					t.Fatalf("turn %q ended with %+v", p, f)
				}
				if !strings.Contains(tr.text, fakemodel.PlainPrefix) || strings.Contains(tr.text, "Done: created") {
					t.Errorf("turn %q answered %q", p, tr.text)
				}
				if strings.HasPrefix(p, "PLAIN: ") && !strings.Contains(tr.text, p) {
					t.Errorf("turn %q answered %q: not its own answer", p, tr.text)
				}
			}
			var got daemon.GetConversationResult
			if err := c.Call(ctx, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv}, &got); err != nil {
				t.Fatalf("conversations/get: %v", err)
			}
			if len(got.Messages) != 2*len(turns) {
				t.Fatalf("stored %d messages, want %d", len(got.Messages), 2*len(turns))
			}
			for i, tr := range turns {
				m := got.Messages[2*i+1]
				squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
				if stored := transcript.MergeContent(m.Segments); squash(stored) != squash(tr.text) {
					t.Errorf("turn %d stored %q, live %q", i+1, stored, tr.text)
				}
			}
		})
	}
}
