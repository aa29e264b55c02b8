package daemon

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// BenchmarkHandoff1000Turns (sub-benchmarks "new" and "live") assembles the prompt of a new session (the
// worst case: the whole conversation goes into the handoff) for a stored
// conversation of 1,000 turns, each a ~300-byte user message and an answer
// by alternating agents with ~1 KB of text, a tool call and a file change.
// It covers reading the messages from bbolt, choosing the unseen ones and
// rendering the budgeted block; "bytes-out" is the prompt's size. "live" is
// a session whose cursor is two turns back (it reads only what it has not
// seen).
func BenchmarkHandoff1000Turns(b *testing.B) {
	e := newEnv(b, nil)
	conv := history.Conversation{ID: e.srv.newID(), Title: "bench", Agents: []string{}}
	err := e.store.Update(func(w *history.Writer) error {
		if err := w.CreateConversation(conv); err != nil {
			return err
		}
		for i := range 1000 {
			u := transcript.Message{ID: e.srv.newID(), Role: transcript.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("please look at this ", 15))}
			add, del := 12, 3
			a := transcript.Message{ID: e.srv.newID(), Role: transcript.RoleAssistant, Agent: []string{"claude", "codex"}[i%2], Status: transcript.StatusCompleted,
				Segments: []transcript.Segment{
					{Type: transcript.SegReasoning, Content: strings.Repeat("thinking ", 40)},
					{Type: transcript.SegContent, Content: fmt.Sprintf("answer %d: %s", i, strings.Repeat("here is what I found ", 50))},
					{Type: transcript.SegTool, ID: fmt.Sprintf("t%d", i), Name: "Edit main.go", Status: "completed"},
					{Type: transcript.SegFileChange, Path: "/ws/main.go", Additions: &add, Deletions: &del, Status: "applied"},
				}}
			if err := w.PutMessage(conv.ID, u, 1); err != nil {
				return err
			}
			if err := w.PutMessage(conv.ID, a, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	msgs, err := e.store.Messages(conv.ID)
	if err != nil {
		b.Fatal(err)
	}
	r := &run{s: e.srv, convID: conv.ID, turnID: e.srv.newID(), userMsg: transcript.Message{ID: e.srv.newID(), Role: transcript.RoleUser, Content: "next question"}}
	for _, tc := range []struct {
		name   string
		fresh  bool
		cursor string
	}{{"new", true, ""}, {"live", false, msgs[len(msgs)-5].ID}} {
		b.Run(tc.name, func(b *testing.B) {
			var out int
			cpu0 := processCPU()
			for b.Loop() {
				blocks, err := e.srv.assemblePrompt(r, tc.fresh, tc.cursor)
				if err != nil {
					b.Fatal(err)
				}
				out = 0
				for _, bl := range blocks {
					out += len(bl.Text.Text)
				}
			}
			if out > transcript.DefaultHandoffBudget+len("next question") {
				b.Fatalf("prompt of %d bytes exceeds the %d-byte budget", out, transcript.DefaultHandoffBudget)
			}
			b.ReportMetric(float64(out), "bytes-out")
			// Process CPU time per op (user + system, GC included): the
			// figure that does not depend on how loaded the machine is.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
