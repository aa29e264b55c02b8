package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// nextQueueSent reads notifications until the daemon sends a queued message
// and returns the turn it became.
func nextQueueSent(ctx context.Context, t *testing.T, c *daemon.Client) daemon.QueueSent {
	t.Helper()
	for {
		n, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for a queued message to be sent: %v", err)
		}
		if n.Method != daemon.NotifyQueue {
			continue
		}
		var p daemon.QueueParams
		if err := json.Unmarshal(n.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.Sent != nil {
			return *p.Sent
		}
	}
}

// sawText reports whether a model request of agent's API after seq carried
// text.
func sawText(w *handoffWorld, agent, text string, after int) bool {
	for _, r := range w.s.ModelRequests() {
		if r.Seq > after && r.API == agentAPI[agent] && r.SawText(text) {
			return true
		}
	}
	return false
}

// TestDaemonQueueSteer: with real codex and claude adapters against the fake
// model, two messages queued behind a codex turn that stalls; "send now" on
// the claude one cancels the codex turn, the claude message runs next, and the
// other queued message (codex again, in the session that was cancelled) runs
// after it, each agent's request carrying its text. (Steering a claude turn
// meets claude-agent-acp's answer shift after a cancel, the case
// claude-cancel-shift, fenced in daemon/runs.go's cancel handling.)
func TestDaemonQueueSteer(t *testing.T) {
	w := newHandoffWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := w.d.client(ctx)
	var first daemon.SendResult
	if err := c.Call(ctx, daemon.MethodChatSend, daemon.SendParams{Agent: "codex", Text: "SLOW: take your time"}, &first); err != nil {
		t.Fatal(err)
	}
	conv := first.ConversationID
	queue := func(agent, text string) string {
		var r daemon.SendResult
		if err := c.Call(ctx, daemon.MethodChatSend, daemon.SendParams{ConversationID: conv, Agent: agent, Text: text}, &r); err != nil || !r.Queued {
			t.Fatalf("queue %q for %s: %+v %v", text, agent, r, err)
		}
		return r.QueueID
	}
	later := longText(3, "codex")
	steer := longText(2, "claude")
	queue("codex", later)
	steerID := queue("claude", steer)
	// Wait until codex's turn is under way (its request stalls at the fake
	// model), so the steer cancels a real prompt.
	for !sawText(w, "codex", "SLOW: take your time", 0) {
		if ctx.Err() != nil {
			t.Fatal("codex never asked the model")
		}
		time.Sleep(50 * time.Millisecond) // poll, not an assertion
	}
	var r daemon.QueueResult
	if err := c.Call(ctx, daemon.MethodQueueSendNow, daemon.QueueItemParams{ConversationID: conv, ID: steerID}, &r); err != nil || !r.Cancelled {
		t.Fatalf("sendNow: %+v %v", r, err)
	}
	if f := collectTurn(ctx, t, c, first, "stalled codex turn").final(); f.Type != transcript.EvTurnCompleted || f.StopReason != "cancelled" {
		t.Fatalf("steered codex turn ended %+v", f)
	}
	for _, want := range []struct{ agent, text string }{{"claude", steer}, {"codex", later}} {
		before := w.lastSeq()
		sent := nextQueueSent(ctx, t, c)
		tr := collectTurn(ctx, t, c, daemon.SendResult{ConversationID: conv, TurnID: sent.TurnID}, want.agent)
		if f := tr.final(); f.Type != transcript.EvTurnCompleted || f.StopReason != "end_turn" {
			t.Fatalf("queued %s turn ended %+v", want.agent, f)
		}
		if !sawText(w, want.agent, want.text, before) {
			t.Errorf("no %s model request after #%d carried %q", want.agent, before, want.text)
		}
	}
	var got daemon.GetConversationResult
	if err := c.Call(ctx, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 6 || len(got.Queue) != 0 || got.Messages[2].Content != steer || got.Messages[3].Agent != "claude" || got.Messages[4].Content != later || got.Messages[5].Agent != "codex" {
		t.Fatalf("stored: queue %+v, %d messages", got.Queue, len(got.Messages))
	}
}
