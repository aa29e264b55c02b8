package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// testEnv is a real daemon serving on a unix socket in a temp dir.
type testEnv struct {
	t      testing.TB
	ws     string
	sock   string
	dbPath string
	srv    *Server
	store  *history.Store
	stop   func()
	fake   *fakeFactory
}

// shortTempDir returns a temp dir short enough for a unix socket path.
func shortTempDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "od")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// newEnv starts a daemon; tweak may change its Options (the fake agents are
// the default backend).
func newEnv(t testing.TB, tweak func(*Options)) *testEnv {
	t.Helper()
	base := shortTempDir(t)
	e := &testEnv{t: t, ws: filepath.Join(base, "ws"), sock: filepath.Join(base, "s.sock"), dbPath: filepath.Join(base, "state", "ochat.db"), fake: &fakeFactory{}}
	if err := os.MkdirAll(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	e.start(tweak)
	return e
}

func (e *testEnv) start(tweak func(*Options)) {
	t := e.t
	st, err := history.Open(e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkInterrupted(nowMs()); err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Workspace:    e.ws,
		Store:        st,
		StartAgent:   e.fake.start,
		LoadRegistry: func() (AgentRegistry, error) { return fakeRegistry{names: []string{"fake", "other", "hang"}}, nil },
		CancelGrace:  10 * time.Second, // a loaded machine may take seconds to answer a cancel
	}
	if tweak != nil {
		tweak(&opts)
	}
	srv := New(opts)
	ln, err := Listen(e.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	e.srv, e.store = srv, st
	stopped := false
	e.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		if err := srv.Close(cctx); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	}
	t.Cleanup(e.stop)
}

func (e *testEnv) restart(tweak func(*Options)) {
	e.stop()
	e.start(tweak)
}

// dial connects and initializes a client.
func (e *testEnv) dial(name string) *Client {
	e.t.Helper()
	nc, err := net.Dial("unix", e.sock)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewClient(ctx, nc, name, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { nc.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func call[R any](t testing.TB, c *Client, method string, params any) R {
	t.Helper()
	var r R
	if err := c.Call(ctxT(t), method, params, &r); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

// callErr expects a JSON-RPC error with code.
func callErr(t testing.TB, c *Client, method string, params any, code jsonrpc2.Code) string {
	t.Helper()
	err := c.Call(ctxT(t), method, params, nil)
	var je *jsonrpc2.Error
	if !errors.As(err, &je) {
		t.Fatalf("%s: want error %d, got %v", method, code, err)
	}
	if je.Code != code {
		t.Fatalf("%s: want code %d, got %d (%s)", method, code, je.Code, je.Message)
	}
	return je.Message
}

// turnLog is what one client saw of one turn.
type turnLog struct {
	events []transcript.Event
	others []Notification
}

func (l turnLog) terminal() transcript.Event { return l.events[len(l.events)-1] }

// collect reads notifications until the terminal event of turnID; other
// notifications are kept in others. onNote may act on each (e.g. answer a
// permission).
func collect(t testing.TB, c *Client, turnID string, onNote func(Notification)) turnLog {
	t.Helper()
	var l turnLog
	ctx := ctxT(t)
	for {
		n, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for turn %s: %v (got %d events)", turnID, err, len(l.events))
		}
		if onNote != nil {
			onNote(n)
		}
		if n.Method != NotifyEvent {
			l.others = append(l.others, n)
			continue
		}
		var p EventParams
		if err := json.Unmarshal(n.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.TurnID != turnID {
			continue
		}
		l.events = append(l.events, p.Event)
		if p.Event.Terminal() {
			return l
		}
	}
}

// checkSeq checks that events are numbered from first, contiguous.
func checkSeq(t testing.TB, evs []transcript.Event, first int64) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != first+int64(i) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, first+int64(i))
		}
		if ev.Timestamp == 0 {
			t.Fatalf("event %d has no timestamp", i)
		}
	}
}
