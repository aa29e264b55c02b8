package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
)

// directClient is a protocol client of w's daemon, for what a test does
// beside the CLI (find the running conversation, queue a message).
func (w *trustWorld) directClient(t *testing.T) *daemon.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := daemon.Dial(ctx, daemon.DialOptions{Workspace: w.ws})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := daemon.NewClient(ctx, nc, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestChatQueues: `ochatd chat` on a busy conversation queues its message
// with a note, is listed by `ochatd queue`, and streams its own turn once
// the running one ends.
func TestChatQueues(t *testing.T) {
	w := userAgentWorld(t)
	first, _ := startChat(w.ws, strings.NewReader(""), "--agent", "test", "SLOW 30") // 30 chunks 50 ms apart
	conv := runningConversation(t, w)
	second, errb := startChat(w.ws, strings.NewReader(""), "--conversation", conv, "PLAIN queued answer")
	waitFor(t, "chat to say its message is queued", func() bool {
		return strings.Contains(errb.String(), "ochatd: queued behind the running turn; it will be sent when that turn ends (to drop it: ochatd queue remove "+conv+" ")
	})
	code, out, errs := w.run(t, "queue", conv)
	if code != 0 || !strings.Contains(out, "PLAIN queued answer") || !strings.Contains(out, "test") {
		t.Fatalf("queue (%d):\n%s\n%s", code, out, errs)
	}
	code, out, _ = w.run(t, "queue", "--json", conv)
	var res daemon.QueueResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res.Items) != 1 || res.Items[0].Text != "PLAIN queued answer" || res.Items[0].Agent != "test" {
		t.Fatalf("queue --json (%d, %v):\n%s", code, err, out)
	}
	r1 := <-first
	if r1.code != 0 || !strings.Contains(r1.out, "c29") {
		t.Fatalf("first chat (%d):\n%s\n%s", r1.code, r1.out, r1.errs)
	}
	r2 := <-second
	if r2.code != 0 || !strings.Contains(r2.out, "queued answer") || strings.Contains(r2.out, "c0") {
		t.Fatalf("queued chat (%d):\nstdout %q\nstderr %s", r2.code, r2.out, r2.errs)
	}
	if !strings.Contains(r2.errs, "the turn before ended; sending the queued message") {
		t.Errorf("queued chat's stderr:\n%s", r2.errs)
	}
	if code, out, _ := w.run(t, "queue", conv); code != 0 || !strings.Contains(out, "no message is queued in "+conv) {
		t.Errorf("queue after it drained (%d):\n%s", code, out)
	}
}

// TestQueueCommands: queue edit, remove and send-now change the daemon's
// queue; a removed message ends the chat waiting for it; unknown ids are
// clear errors.
func TestQueueCommands(t *testing.T) {
	w := userAgentWorld(t)
	first, _ := startChat(w.ws, strings.NewReader(""), "--agent", "test", "SLOW 400") // 20 s unless steered
	cl := w.directClient(t)
	conv := runningConversation(t, w)
	send := func(text string) string {
		var r daemon.SendResult
		if err := cl.Call(context.Background(), daemon.MethodChatSend, daemon.SendParams{ConversationID: conv, Text: text}, &r); err != nil || !r.Queued {
			t.Fatalf("queue %q: %+v %v", text, r, err)
		}
		return r.QueueID
	}
	waiting, errb := startChat(w.ws, strings.NewReader(""), "--conversation", conv, "PLAIN dropped")
	waitFor(t, "chat to queue", func() bool { return strings.Contains(errb.String(), "queued behind the running turn") })
	var q daemon.GetConversationResult
	if err := cl.Call(context.Background(), daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv}, &q); err != nil || len(q.Queue) != 1 {
		t.Fatalf("queue %+v %v", q.Queue, err)
	}
	dropped := q.Queue[0].ID
	a := send("PLAIN first")
	b := send("PLAIN second")

	if code, out, errs := w.run(t, "queue", "remove", conv, dropped); code != 0 || !strings.Contains(out, "removed "+dropped) {
		t.Fatalf("queue remove (%d):\n%s\n%s", code, out, errs)
	}
	if r := <-waiting; r.code != exitCancelledElsewhere || !strings.Contains(r.errs, "the queued message was removed (from another client) before it was sent") {
		t.Fatalf("chat whose message was removed (%d):\n%s", r.code, r.errs)
	}
	if code, out, errs := w.run(t, "queue", "edit", conv, a, "PLAIN first edited"); code != 0 || !strings.Contains(out, "edited "+a) || !strings.Contains(out, "PLAIN first edited") {
		t.Fatalf("queue edit (%d):\n%s\n%s", code, out, errs)
	}
	if code, _, errs := w.run(t, "queue", "remove", conv, "01NOPE"); code != 1 || !strings.Contains(errs, `"01NOPE" is not a queued message of conversation `+conv) {
		t.Fatalf("queue remove of an unknown id (%d): %s", code, errs)
	}
	if code, _, errs := w.run(t, "queue", "edit", conv); code != 2 || !strings.Contains(errs, "usage: ochatd queue") {
		t.Fatalf("queue edit without ids (%d): %s", code, errs)
	}
	code, out, errs := w.run(t, "queue", "send-now", conv, b)
	if code != 0 || !strings.Contains(out, "cancelling the running turn of "+conv+"; "+b+" is sent next") {
		t.Fatalf("queue send-now (%d):\n%s\n%s", code, out, errs)
	}
	if r := <-first; r.code != exitCancelledElsewhere {
		t.Fatalf("the steered chat (%d):\n%s", r.code, r.errs)
	}
	var got daemon.GetConversationResult
	waitFor(t, "both queued messages to be answered", func() bool {
		if err := cl.Call(context.Background(), daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv}, &got); err != nil {
			t.Fatal(err)
		}
		return len(got.Messages) == 6 && got.Messages[5].Status == "completed"
	})
	var users []string
	for _, m := range got.Messages {
		if m.Role == "user" {
			users = append(users, m.Content)
		}
	}
	if want := "SLOW 400|PLAIN second|PLAIN first edited"; strings.Join(users, "|") != want {
		t.Fatalf("prompts %q, want %q", users, want)
	}
}

// TestChatQueuedInterrupt: Ctrl-C while chat's message waits in the queue
// removes the message and leaves the running turn (another client's) alone.
func TestChatQueuedInterrupt(t *testing.T) {
	w := userAgentWorld(t)
	first, _ := startChat(w.ws, strings.NewReader(""), "--agent", "test", "SLOW 400")
	conv := runningConversation(t, w)
	var out bytes.Buffer
	errb := &syncBuffer{}
	child := startChatChild(t, &out, errb, "--workspace", w.ws, "--conversation", conv, "PLAIN never sent")
	waitFor(t, "the child chat to queue", func() bool { return strings.Contains(errb.String(), "queued behind the running turn") })
	if err := child.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := exitStatus(t, child, child.Wait()); code != 130 || !strings.Contains(errb.String(), "interrupt: removing the queued message") ||
		!strings.Contains(errb.String(), "the queued message was removed; nothing was sent") {
		t.Fatalf("interrupted queued chat: exit %d\n%s", code, errb.String())
	}
	cl := w.directClient(t)
	var got daemon.GetConversationResult
	if err := cl.Call(context.Background(), daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Queue) != 0 || len(got.Messages) != 2 || got.Messages[1].Status != "streaming" {
		t.Fatalf("after the interrupt: queue %+v, %d messages, running turn %q", got.Queue, len(got.Messages), got.Messages[len(got.Messages)-1].Status)
	}
	if code, _, errs := w.run(t, "cancel", conv); code != 0 {
		t.Fatalf("cancel (%d): %s", code, errs)
	}
	<-first
}
