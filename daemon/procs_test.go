package daemon

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/transcript"
)

// newRealEnvWith is newRealEnv with extra testagent environment and option
// changes.
func newRealEnvWith(t testing.TB, env map[string]string, tweak func(*Options)) *testEnv {
	bin := testagent(t)
	cfg := t.TempDir()
	if env == nil {
		env = map[string]string{}
	}
	env["TESTAGENT_STATE"] = t.TempDir()
	settings := map[string]any{"agent_servers": map[string]any{"test": map[string]any{"command": bin, "env": env}}}
	b, _ := json.Marshal(settings)
	os.MkdirAll(filepath.Join(cfg, "ochat"), 0o700)
	if err := os.WriteFile(filepath.Join(cfg, "ochat", "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(o *Options) {
		o.StartAgent = nil
		o.LoadRegistry = nil
		o.UserConfigDir = cfg
		if tweak != nil {
			tweak(o)
		}
	})
}

// eventually polls cond every 20 ms for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// waitPIDFile returns the pid written to path, waiting for it.
func waitPIDFile(t testing.TB, path string) int {
	t.Helper()
	var pid int
	eventually(t, "child pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// processGone reports that pid no longer runs (absent, or a zombie nobody
// reaped yet).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func TestPromptTooLong(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	big := strings.Repeat("x", 20<<20)
	msg := callErr(t, c, MethodChatSend, SendParams{Text: "PLAIN " + big}, jsonrpc2.InvalidParams)
	if msg != "prompt is 20.0 MiB; the limit is 8 MiB" {
		t.Fatalf("message %q", msg)
	}
	res := call[SendResult](t, c, MethodChatSend, SendParams{Text: "PLAIN"})
	collect(t, c, res.TurnID, nil)
	callErr(t, c, MethodChatEdit, EditParams{ConversationID: res.ConversationID, MessageID: res.UserMessageID, Text: big}, jsonrpc2.InvalidParams)
	list := call[ListConversationsResult](t, c, MethodConversationsList, nil)
	if len(list.Conversations) != 1 {
		t.Fatalf("a refused prompt was stored: %+v", list.Conversations)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	if len(got.Messages) != 2 || got.Messages[0].Content != "PLAIN" {
		t.Fatalf("messages after a refused edit %+v", got.Messages)
	}
}

// A cancel while the agent is still initializing ends the turn cancelled
// without waiting for initialize, and the starting process group is killed.
func TestCancelWhileAgentStarts(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	e := newRealEnvWith(t, map[string]string{"TESTAGENT_INIT_DELAY_MS": "60000", "TESTAGENT_CHILD_PIDFILE": pidfile}, nil)
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "test", Text: "PLAIN hi"})
	child := waitPIDFile(t, pidfile)
	if r := call[CancelResult](t, c, MethodChatCancel, ConversationParams{ConversationID: res.ConversationID}); !r.Cancelled {
		t.Fatal("cancel reported false")
	}
	log := collect(t, c, res.TurnID, nil)
	if got := log.terminal(); got.Type != transcript.EvTurnCompleted || got.StopReason != "cancelled" {
		t.Fatalf("terminal %+v", got)
	}
	eventually(t, "the starting agent's process group is killed", func() bool { return processGone(child) })
	if n := e.srv.liveAgents(); n != 0 {
		t.Fatalf("%d live agents after a cancelled start", n)
	}
}

// An agent whose session/new fails is stopped, not kept for the daemon's
// lifetime.
func TestFailedSessionStopsAgent(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.LoadRegistry = func() (AgentRegistry, error) { return fakeRegistry{names: []string{"nosession"}}, nil }
	})
	c := e.dial("a")
	for range 3 {
		res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "nosession", Text: "PLAIN"})
		log := collect(t, c, res.TurnID, nil)
		if got := log.terminal(); got.Type != transcript.EvTurnFailed || !strings.Contains(got.Message, "Authentication required") {
			t.Fatalf("terminal %+v", got)
		}
	}
	e.fake.mu.Lock()
	defer e.fake.mu.Unlock()
	if len(e.fake.agents) != 3 {
		t.Fatalf("%d agents started", len(e.fake.agents))
	}
	for i, a := range e.fake.agents {
		if !a.closed.Load() {
			t.Errorf("agent %d still running after its session/new failed", i)
		}
	}
	if n := e.srv.liveAgents(); n != 0 {
		t.Fatalf("%d live agents", n)
	}
}

// An agent process that serves no turn for AgentIdleTimeout is stopped; the
// next turn starts a new one and goes on with the conversation.
func TestIdleAgentReaped(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	e := newRealEnvWith(t, map[string]string{"TESTAGENT_CHILD_PIDFILE": pidfile}, func(o *Options) { o.AgentIdleTimeout = 300 * time.Millisecond })
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "test", Text: "PLAIN hi"})
	if got := collect(t, c, res.TurnID, nil).terminal(); got.Type != transcript.EvTurnCompleted {
		t.Fatalf("terminal %+v", got)
	}
	child := waitPIDFile(t, pidfile)
	eventually(t, "the idle agent is stopped", func() bool { return e.srv.liveAgents() == 0 && processGone(child) })
	os.Remove(pidfile)
	res2 := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: "PLAIN again"})
	if got := collect(t, c, res2.TurnID, nil).terminal(); got.Type != transcript.EvTurnCompleted {
		t.Fatalf("second turn %+v", got)
	}
}

// Starting an agent process over MaxAgents stops the least recently used
// idle one.
func TestMaxAgents(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxAgents = 2 })
	c := e.dial("a")
	for i := range 3 {
		res := call[SendResult](t, c, MethodChatSend, SendParams{Text: "PLAIN"})
		collect(t, c, res.TurnID, nil)
		if n := e.srv.liveAgents(); n > 2 {
			t.Fatalf("after conversation %d: %d live agents, cap 2", i, n)
		}
	}
	e.fake.mu.Lock()
	defer e.fake.mu.Unlock()
	if len(e.fake.agents) != 3 {
		t.Fatalf("%d agents started", len(e.fake.agents))
	}
	eventually(t, "the least recently used agent is stopped", func() bool { return e.fake.agents[0].closed.Load() })
	if e.fake.agents[1].closed.Load() || e.fake.agents[2].closed.Load() {
		t.Fatal("a recently used agent was stopped")
	}
}

// waitPermission reads c's notifications until an ochat/permission arrives.
func waitPermission(t testing.TB, c *Client) PermissionParams {
	t.Helper()
	ctx := ctxT(t)
	for {
		n, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for a permission: %v", err)
		}
		if n.Method == NotifyPermission {
			var p PermissionParams
			if err := json.Unmarshal(n.Params, &p); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
}

// A permission pending when the only client goes away survives a reconnect
// within PermissionTimeout, and is answered cancelled (ending the turn) when
// no client comes back in time.
func TestPermissionTimeoutWithoutClients(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timeout   time.Duration
		reconnect bool
	}{
		{"reconnect in time", time.Hour, true},
		{"nobody comes back", 200 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.PermissionTimeout = tc.timeout })
			nc, err := net.Dial("unix", e.sock)
			if err != nil {
				t.Fatal(err)
			}
			a, err := NewClient(ctxT(t), nc, "a", "test")
			if err != nil {
				t.Fatal(err)
			}
			res := call[SendResult](t, a, MethodChatSend, SendParams{Text: "WRITE hello.txt"})
			waitPermission(t, a)
			nc.Close()
			if tc.reconnect {
				b := e.dial("b")
				sub := call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: res.ConversationID})
				if sub.Running == nil || len(sub.Permissions) != 1 {
					t.Fatalf("after a reconnect: running %v, permissions %+v", sub.Running, sub.Permissions)
				}
				call[struct{}](t, b, MethodPermissionRespond, RespondParams{PermissionID: sub.Permissions[0].PermissionID, OptionID: "allow"})
				if got := collect(t, b, res.TurnID, nil).terminal(); got.Type != transcript.EvTurnCompleted || got.StopReason != "end_turn" {
					t.Fatalf("terminal %+v", got)
				}
				return
			}
			eventually(t, "the turn ends with no client", func() bool {
				m, err := e.store.Messages(res.ConversationID)
				return err == nil && len(m) == 2 && m[1].Status != transcript.StatusStreaming
			})
			m, _ := e.store.Messages(res.ConversationID)
			if m[1].Status != transcript.StatusCancelled {
				t.Fatalf("turn ended %+v", m[1])
			}
			// The run is unregistered just after its last store write.
			b := e.dial("b")
			eventually(t, "the conversation no longer running", func() bool {
				return !call[ListConversationsResult](t, b, MethodConversationsList, nil).Conversations[0].Running
			})
		})
	}
}

// A file change whose write did not happen (permission rejected or
// cancelled, tool failed) is stored with status "rejected" and left out of
// the summary's file counts; an allowed one is not.
func TestRejectedFileChanges(t *testing.T) {
	e := newRealEnv(t)
	c := e.dial("a")
	for _, tc := range []struct {
		scenario string
		answer   string // option id, or "" to cancel
		want     string
	}{
		{"WRITE", "reject", FileRejected},
		{"WRITE", "", FileRejected},
		{"ASK", "reject", FileRejected},
		{"ASK", "", FileRejected},
		{"WRITE", "allow", ""},
	} {
		name := tc.scenario + "/" + tc.answer
		res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "test", Text: tc.scenario + " f.txt one"})
		log := collect(t, c, res.TurnID, func(n Notification) {
			if n.Method != NotifyPermission {
				return
			}
			var p PermissionParams
			json.Unmarshal(n.Params, &p)
			call[struct{}](t, c, MethodPermissionRespond, RespondParams{PermissionID: p.PermissionID, OptionID: tc.answer, Cancelled: tc.answer == ""})
		})
		got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
		m := got.Messages[len(got.Messages)-1]
		var changes []transcript.Segment
		for _, sg := range m.Segments {
			if sg.Type == transcript.SegFileChange {
				changes = append(changes, sg)
			}
		}
		if len(changes) == 0 {
			t.Fatalf("%s: no fileChange segment in %+v", name, m.Segments)
		}
		for _, sg := range changes {
			if sg.Status != tc.want {
				t.Errorf("%s: fileChange %s status %q, want %q", name, sg.Path, sg.Status, tc.want)
			}
		}
		if ev := log.events[len(log.events)-2]; tc.want == FileRejected && (ev.Type != transcript.EvActivityUpsert || ev.Segment.Status != FileRejected) {
			t.Errorf("%s: live clients were not told: event before the end %+v", name, ev)
		}
		if sum := transcript.Summarize(m); (sum.FileChanges == 0) != (tc.want == FileRejected) {
			t.Errorf("%s: summary counts %d file changes", name, sum.FileChanges)
		}
		os.Remove(filepath.Join(e.ws, "f.txt"))
	}
}

// ochat/daemon/stop cancels the running turn (stored cancelled, not
// failed), stops taking turns and ends Serve.
func TestDaemonStop(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Text: "SLOW"})
	call[struct{}](t, c, MethodDaemonStop, nil)
	if got := collect(t, c, res.TurnID, nil).terminal(); got.Type != transcript.EvTurnCompleted || got.StopReason != "cancelled" {
		t.Fatalf("terminal %+v", got)
	}
	select {
	case <-c.Done():
	case <-ctxT(t).Done():
		t.Fatal("the daemon did not close the connection after stop")
	}
	m, err := e.store.Messages(res.ConversationID)
	if err != nil || m[1].Status != transcript.StatusCancelled {
		t.Fatalf("stored turn %+v, %v", m, err)
	}
}
