package daemon

import (
	"encoding/json"
	"fmt"
	"image/color"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// queueTexts are the texts of a queue, in order.
func queueTexts(q []history.QueuedMessage) []string {
	out := []string{}
	for _, m := range q {
		out = append(out, m.Text)
	}
	return out
}

// nextQueue reads notifications until an ochat/queue one (others are
// dropped) and returns its params.
func nextQueue(t testing.TB, c *Client) QueueParams {
	t.Helper()
	ctx := ctxT(t)
	for {
		n, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for ochat/queue: %v", err)
		}
		if n.Method != NotifyQueue {
			continue
		}
		var p QueueParams
		if err := json.Unmarshal(n.Params, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// nextSent reads notifications until the daemon sends a queued message and
// returns which turn it became.
func nextSent(t testing.TB, c *Client) (QueueSent, []history.QueuedMessage) {
	t.Helper()
	for {
		if p := nextQueue(t, c); p.Sent != nil {
			return *p.Sent, p.Items
		}
	}
}

// enqueueT sends text while a turn runs and expects it queued.
func enqueueT(t testing.TB, c *Client, conv, agent, text string) string {
	t.Helper()
	r := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: agent, Text: text})
	if !r.Queued || r.QueueID == "" || r.TurnID != "" || r.ConversationID != conv {
		t.Fatalf("send %q while a turn runs: %+v, want queued", text, r)
	}
	return r.QueueID
}

// userTexts are the conversation's user prompts and the answers' final
// text or error, in stored order.
func transcriptOf(t testing.TB, c *Client, conv string) []string {
	t.Helper()
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	var out []string
	for _, m := range got.Messages {
		switch m.Role {
		case transcript.RoleUser:
			out = append(out, "user: "+m.Content)
		case transcript.RoleAssistant:
			text := ""
			for _, sg := range m.Segments {
				if sg.Type == transcript.SegContent {
					text += sg.Content
				}
			}
			if m.Error != "" {
				text = "error"
			}
			if m.Status == transcript.StatusCancelled {
				// How much of a HOLD turn streamed before the cancel is a
				// race (the turn-start checkpoint comes first); the queue
				// tests care that it was cancelled.
				text = ""
			}
			out = append(out, string(m.Status)+": "+strings.TrimPrefix(text, "echo: "))
		}
	}
	return out
}

// TestQueueInOrder: two messages sent during a slow turn are queued, every
// subscriber sees the queue change, and they are sent in order, each as its
// own turn, when the turn before ends.
func TestQueueInOrder(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.dial("a"), e.dial("b")
	first := call[SendResult](t, a, MethodChatSend, SendParams{Agent: "fake", Text: "STREAM 100 10000"}) // ~1 s
	conv := first.ConversationID
	sub := call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: conv})
	if sub.Queue == nil || len(sub.Queue) != 0 {
		t.Fatalf("subscribe queue = %#v, want []", sub.Queue)
	}
	id1 := enqueueT(t, a, conv, "", "one")
	id2 := enqueueT(t, a, conv, "", "two")
	if id1 == id2 {
		t.Fatal("two queued messages share an id")
	}
	// The second client sees both changes, with the whole list each time.
	if p := nextQueue(t, b); !slices.Equal(queueTexts(p.Items), []string{"one"}) || p.Items[0].ID != id1 || p.Items[0].Agent != "fake" || p.Items[0].CreatedAt == 0 {
		t.Fatalf("first ochat/queue %+v", p)
	}
	if p := nextQueue(t, b); !slices.Equal(queueTexts(p.Items), []string{"one", "two"}) {
		t.Fatalf("second ochat/queue %+v", p)
	}
	got := call[GetConversationResult](t, a, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if !slices.Equal(queueTexts(got.Queue), []string{"one", "two"}) {
		t.Fatalf("conversations/get queue %+v", got.Queue)
	}
	late := e.dial("late")
	if s := call[SubscribeResult](t, late, MethodSubscribe, ConversationParams{ConversationID: conv}); !slices.Equal(queueTexts(s.Queue), []string{"one", "two"}) {
		t.Fatalf("late subscribe queue %+v", s.Queue)
	}

	if l := collect(t, a, first.TurnID, nil); l.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("first turn %+v", l.terminal())
	}
	sent, rest := nextSent(t, a)
	if sent.ID != id1 || sent.TurnID == "" || sent.UserMessageID == "" || !slices.Equal(queueTexts(rest), []string{"two"}) {
		t.Fatalf("first sent %+v, rest %+v", sent, rest)
	}
	if l := collect(t, a, sent.TurnID, nil); l.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("queued turn one %+v", l.terminal())
	}
	sent2, rest := nextSent(t, a)
	if sent2.ID != id2 || len(rest) != 0 {
		t.Fatalf("second sent %+v, rest %+v", sent2, rest)
	}
	collect(t, a, sent2.TurnID, nil)
	want := []string{"user: STREAM 100 10000", "completed: " + strings.Repeat("x", 100), "user: one", "completed: one", "user: two", "completed: two"}
	if got := transcriptOf(t, a, conv); !slices.Equal(got, want) {
		t.Fatalf("transcript\n got %q\nwant %q", got, want)
	}
	// b saw the same: the queue drained, one item at a time.
	if _, rest := nextSent(t, b); !slices.Equal(queueTexts(rest), []string{"two"}) {
		t.Fatalf("b: first sent, rest %+v", rest)
	}
	if _, rest := nextSent(t, b); len(rest) != 0 {
		t.Fatalf("b: second sent, rest %+v", rest)
	}
	if q, err := e.store.Queue(conv); err != nil || len(q) != 0 {
		t.Fatalf("stored queue %+v, %v", q, err)
	}
	// An idle conversation answers as before.
	if r := call[SendResult](t, a, MethodChatSend, SendParams{ConversationID: conv, Text: "PLAIN"}); r.Queued || r.TurnID == "" {
		t.Fatalf("send on an idle conversation %+v", r)
	}
}

// TestQueueSendNow: sendNow cancels the running turn and the chosen message
// goes next, ahead of older ones.
func TestQueueSendNow(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	first := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "fake", Text: "HOLD 1"})
	conv := first.ConversationID
	enqueueT(t, c, conv, "", "older")
	steer := enqueueT(t, c, conv, "", "steer")
	r := call[QueueResult](t, c, MethodQueueSendNow, QueueItemParams{ConversationID: conv, ID: steer})
	if !r.Cancelled || !slices.Equal(queueTexts(r.Items), []string{"steer", "older"}) {
		t.Fatalf("sendNow %+v", r)
	}
	if l := collect(t, c, first.TurnID, nil); l.terminal().StopReason != "cancelled" {
		t.Fatalf("steered turn %+v", l.terminal())
	}
	sent, _ := nextSent(t, c)
	if sent.ID != steer {
		t.Fatalf("sent %+v, want the steering message %s", sent, steer)
	}
	collect(t, c, sent.TurnID, nil)
	sent, _ = nextSent(t, c)
	collect(t, c, sent.TurnID, nil)
	want := []string{"user: HOLD 1", "cancelled: ", "user: steer", "completed: steer", "user: older", "completed: older"}
	if got := transcriptOf(t, c, conv); !slices.Equal(got, want) {
		t.Fatalf("transcript\n got %q\nwant %q", got, want)
	}
}

// TestQueueUpdateRemove: a queued message can be edited or dropped until it
// is sent; unknown ids and blank text are clear errors that change nothing.
func TestQueueUpdateRemove(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	first := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "fake", Text: "HOLD 1"})
	conv := first.ConversationID
	ida := enqueueT(t, c, conv, "", "a")
	idb := enqueueT(t, c, conv, "", "b")
	enqueueT(t, c, conv, "", "c")
	if r := call[QueueResult](t, c, MethodQueueUpdate, QueueItemParams{ConversationID: conv, ID: idb, Text: "b edited"}); !slices.Equal(queueTexts(r.Items), []string{"a", "b edited", "c"}) {
		t.Fatalf("update %+v", r)
	}
	if r := call[QueueResult](t, c, MethodQueueRemove, QueueItemParams{ConversationID: conv, ID: ida}); !slices.Equal(queueTexts(r.Items), []string{"b edited", "c"}) {
		t.Fatalf("remove %+v", r)
	}
	for _, tc := range []struct {
		method string
		p      QueueItemParams
		code   jsonrpc2.Code
		want   string
	}{
		{MethodQueueRemove, QueueItemParams{ConversationID: conv, ID: ida}, jsonrpc2.InvalidParams, "is not a queued message"},
		{MethodQueueUpdate, QueueItemParams{ConversationID: conv, ID: "nope", Text: "x"}, jsonrpc2.InvalidParams, `"nope" is not a queued message`},
		{MethodQueueSendNow, QueueItemParams{ConversationID: conv, ID: "nope"}, jsonrpc2.InvalidParams, "is not a queued message"},
		{MethodQueueUpdate, QueueItemParams{ConversationID: conv, ID: idb, Text: "  "}, jsonrpc2.InvalidParams, "text is required"},
		{MethodQueueRemove, QueueItemParams{ConversationID: conv}, jsonrpc2.InvalidParams, "id is required"},
		{MethodQueueRemove, QueueItemParams{ConversationID: "01NOPE", ID: idb}, CodeNotFound, "unknown conversation"},
	} {
		if msg := callErr(t, c, tc.method, tc.p, tc.code); !strings.Contains(msg, tc.want) {
			t.Errorf("%s %+v: %q, want %q", tc.method, tc.p, msg, tc.want)
		}
	}
	// A full queue refuses one more message and keeps what it has.
	for i := 2; i < MaxQueued; i++ {
		enqueueT(t, c, conv, "", fmt.Sprintf("filler %d", i))
	}
	if msg := callErr(t, c, MethodChatSend, SendParams{ConversationID: conv, Text: "one too many"}, CodeConflict); !strings.Contains(msg, "100 messages are already queued") {
		t.Errorf("send to a full queue: %q", msg)
	}
	for _, m := range call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv}).Queue[2:] {
		call[QueueResult](t, c, MethodQueueRemove, QueueItemParams{ConversationID: conv, ID: m.ID})
	}
	if q, _ := e.store.Queue(conv); !slices.Equal(queueTexts(q), []string{"b edited", "c"}) {
		t.Fatalf("stored queue %+v", q)
	}
	call[CancelResult](t, c, MethodChatCancel, ConversationParams{ConversationID: conv})
	collect(t, c, first.TurnID, nil)
	for range 2 {
		sent, _ := nextSent(t, c)
		collect(t, c, sent.TurnID, nil)
	}
	want := []string{"user: HOLD 1", "cancelled: ", "user: b edited", "completed: b edited", "user: c", "completed: c"}
	if got := transcriptOf(t, c, conv); !slices.Equal(got, want) {
		t.Fatalf("transcript\n got %q\nwant %q", got, want)
	}
}

// TestQueueSurvivesRestart: a queued message is stored; a daemon that stops
// mid-turn keeps it, and the next daemon sends it.
func TestQueueSurvivesRestart(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	first := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "fake", Text: "HOLD 1"})
	conv := first.ConversationID
	id := enqueueT(t, c, conv, "", "after restart")
	e.restart(nil)
	c = e.dial("a2")
	deadline := time.Now().Add(15 * time.Second)
	want := []string{"user: HOLD 1", "failed: error", "user: after restart", "completed: after restart"}
	for {
		got := transcriptOf(t, c, conv)
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restart the queued message %s was not sent: transcript %q", id, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if q, err := e.store.Queue(conv); err != nil || len(q) != 0 {
		t.Fatalf("stored queue after it was sent: %+v, %v", q, err)
	}
}

// mutableRegistry is a fakeRegistry whose agents a test can change.
type mutableRegistry struct {
	mu    sync.Mutex
	names []string
}

func (m *mutableRegistry) set(names ...string) {
	m.mu.Lock()
	m.names = names
	m.mu.Unlock()
}

func (m *mutableRegistry) load() (AgentRegistry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fakeRegistry{names: slices.Clone(m.names)}, nil
}

// TestQueueFailingAgent: a queued message to an agent that fails to start
// (or has gone from the settings) fails that turn only; the next queued
// message still runs.
func TestQueueFailingAgent(t *testing.T) {
	reg := &mutableRegistry{names: []string{"fake", "nosession", "other"}}
	e := newEnv(t, func(o *Options) { o.LoadRegistry = reg.load })
	c := e.dial("a")
	first := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "fake", Text: "HOLD 1"})
	conv := first.ConversationID
	enqueueT(t, c, conv, "nosession", "to a broken agent")
	enqueueT(t, c, conv, "other", "to a removed agent")
	enqueueT(t, c, conv, "fake", "still runs")
	reg.set("fake", "nosession") // "other" is gone by the time its message is sent
	call[CancelResult](t, c, MethodChatCancel, ConversationParams{ConversationID: conv})
	collect(t, c, first.TurnID, nil)
	var terms []transcript.Event
	for range 3 {
		sent, _ := nextSent(t, c)
		terms = append(terms, collect(t, c, sent.TurnID, nil).terminal())
	}
	if terms[0].Type != transcript.EvTurnFailed || !strings.Contains(terms[0].Message, "Authentication required") {
		t.Fatalf("broken agent's turn %+v", terms[0])
	}
	if terms[1].Type != transcript.EvTurnFailed || !strings.Contains(terms[1].Message, `unknown agent "other"`) {
		t.Fatalf("removed agent's turn %+v", terms[1])
	}
	if terms[2].Type != transcript.EvTurnCompleted {
		t.Fatalf("last queued turn %+v", terms[2])
	}
	want := []string{"user: HOLD 1", "cancelled: ", "user: to a broken agent", "failed: error",
		"user: to a removed agent", "failed: error", "user: still runs", "completed: still runs"}
	if got := transcriptOf(t, c, conv); !slices.Equal(got, want) {
		t.Fatalf("transcript\n got %q\nwant %q", got, want)
	}
}

// TestQueueAttachment: a queued message's attachments are read when it is
// queued (a later change of the file does not reach the agent), their blob
// is kept by the queue, and the scripted agent gets them with the turn.
func TestQueueAttachment(t *testing.T) {
	e := newAttachEnv(t)
	c := e.dial("a")
	red := pngBytes(t, 3, 3, color.RGBA{255, 0, 0, 255})
	writeWS(t, e, "a.png", red)
	first := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "vision", Text: "SLOW 20"}) // 20 chunks 50 ms apart
	conv := first.ConversationID
	q := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Text: "BLOCKS", Attachments: []transcript.Attachment{{Kind: "image", Path: "a.png"}}})
	if !q.Queued {
		t.Fatalf("send with an attachment during a turn: %+v", q)
	}
	writeWS(t, e, "a.png", pngBytes(t, 3, 3, color.RGBA{0, 0, 255, 255}))
	if err := e.store.Check(); err != nil {
		t.Fatalf("store while the message waits: %v", err)
	}
	if st, _ := e.store.Stats(); st.Blobs != 1 {
		t.Fatalf("the queued attachment's blob: %d blobs stored, want 1", st.Blobs)
	}
	collect(t, c, first.TurnID, nil)
	sent, _ := nextSent(t, c)
	msgs, got := runBlocks(t, c, SendResult{ConversationID: conv, TurnID: sent.TurnID})
	want := fmt.Sprintf("text 6\nimage image/png file://%s %d %s", filepath.Join(e.ws, "a.png"), len(red), sha(red))
	if got != want {
		t.Fatalf("queued turn: agent saw\n%s\nwant\n%s", got, want)
	}
	if u := msgs[2]; u.ID != sent.UserMessageID || len(u.Attachments) != 1 || u.Attachments[0].Hash != sha(red) {
		t.Fatalf("stored user message %+v", u)
	}
	if err := e.store.Check(); err != nil {
		t.Fatalf("store after the queued turn: %v", err)
	}
	if st, _ := e.store.Stats(); st.Blobs != 1 {
		t.Fatalf("after the queued turn: %d blobs, want 1", st.Blobs)
	}
}

// TestQueueConcurrentSends: sends racing each other and the end of short
// turns each run exactly once, each as its own completed turn (none lost
// between a turn's end and the next send).
func TestQueueConcurrentSends(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	first := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "fake", Text: "PLAIN"})
	conv := first.ConversationID
	const n = 12
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := e.dial(fmt.Sprintf("c%d", i))
			r := call[SendResult](t, cl, MethodChatSend, SendParams{ConversationID: conv, Text: fmt.Sprintf("m%02d", i)})
			if r.Queued == (r.TurnID != "") {
				t.Errorf("send m%02d: %+v", i, r)
			}
		}()
	}
	wg.Wait()
	var got GetConversationResult
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
		done := len(got.Messages) == 2*(n+1) && len(got.Queue) == 0
		for _, m := range got.Messages {
			done = done && m.Status != transcript.StatusStreaming
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every message ran: %d messages, queue %+v", len(got.Messages), got.Queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
	seen := map[string]int{}
	for i, m := range got.Messages {
		if m.Role == transcript.RoleUser {
			seen[m.Content]++
			if a := got.Messages[i+1]; a.Role != transcript.RoleAssistant || a.Status != transcript.StatusCompleted {
				t.Fatalf("answer to %q: %+v", m.Content, a)
			}
		}
	}
	for i := range n {
		if k := fmt.Sprintf("m%02d", i); seen[k] != 1 {
			t.Fatalf("%s ran %d times; transcript %q", k, seen[k], transcriptOf(t, c, conv))
		}
	}
	if err := e.store.Check(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkQueueHandover measures how long a conversation waits between one
// turn's end and its next queued message starting: from the client reading
// turn.completed to it reading the ochat/queue that names the next turn
// (which includes the store transaction that moves the message from the
// queue to the transcript). b.N messages are queued behind one turn and
// drained; reports p50/p99 in µs.
func BenchmarkQueueHandover(b *testing.B) {
	e := newEnv(b, func(o *Options) { o.Logger = slog.New(slog.DiscardHandler) })
	c := e.dial("bench")
	first := call[SendResult](b, c, MethodChatSend, SendParams{Agent: "fake", Text: "HOLD 1"})
	conv := first.ConversationID
	for i := range b.N {
		enqueueT(b, c, conv, "", fmt.Sprintf("PLAIN %d", i))
	}
	b.ResetTimer()
	call[CancelResult](b, c, MethodChatCancel, ConversationParams{ConversationID: conv})
	turn := first.TurnID
	lat := make([]time.Duration, 0, b.N)
	for range b.N {
		collect(b, c, turn, nil)
		ended := time.Now()
		sent, _ := nextSent(b, c)
		lat = append(lat, time.Since(ended))
		turn = sent.TurnID
	}
	collect(b, c, turn, nil)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
