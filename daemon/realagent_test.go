package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/transcript"
)

var (
	testagentOnce sync.Once
	testagentBin  string
	testagentErr  error
)

// testagent builds internal/testagent/cmd/testagent once per test binary.
func testagent(t testing.TB) string {
	t.Helper()
	testagentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ochat-testagent")
		if err != nil {
			testagentErr = err
			return
		}
		testagentBin = filepath.Join(dir, "testagent")
		out, err := exec.Command("go", "build", "-o", testagentBin, "github.com/ochat-dev/ochat/internal/testagent/cmd/testagent").CombinedOutput()
		if err != nil {
			testagentErr = err
			testagentBin = string(out)
		}
	})
	if testagentErr != nil {
		t.Fatalf("build testagent: %v\n%s", testagentErr, testagentBin)
	}
	return testagentBin
}

// newRealEnv is a daemon whose agent "test" is the scripted ACP testagent,
// configured as a user agent in a private config dir; agents.Start and
// agents.LoadRegistry are the real ones.
func newRealEnv(t testing.TB) *testEnv {
	bin := testagent(t)
	cfg := t.TempDir()
	state := t.TempDir()
	settings := map[string]any{"agent_servers": map[string]any{
		"test": map[string]any{"command": bin, "env": map[string]string{"TESTAGENT_STATE": state}},
	}}
	b, _ := json.Marshal(settings)
	os.MkdirAll(filepath.Join(cfg, "ochat"), 0o700)
	if err := os.WriteFile(filepath.Join(cfg, "ochat", "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(o *Options) {
		o.StartAgent = nil
		o.LoadRegistry = nil
		o.UserConfigDir = cfg
	})
}

func TestRealAgentPlain(t *testing.T) {
	e := newRealEnv(t)
	c := e.dial("a")
	al := call[AgentsListResult](t, c, MethodAgentsList, nil)
	found := false
	for _, a := range al.Agents {
		found = found || (a.Name == "test" && a.Available)
	}
	if !found {
		t.Fatalf("agents/list has no available test agent: %+v", al.Agents)
	}
	res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "test", Text: "PLAIN hello there"})
	log := collect(t, c, res.TurnID, nil)
	checkSeq(t, log.events, 1)
	if log.terminal().Type != transcript.EvTurnCompleted || log.terminal().StopReason != "end_turn" {
		t.Fatalf("terminal %+v", log.terminal())
	}
	sawState := false
	for _, n := range log.others {
		sawState = sawState || n.Method == NotifyAgentState
	}
	if !sawState {
		t.Error("no ochat/agentState notification")
	}
	sub := call[SubscribeResult](t, e.dial("late"), MethodSubscribe, ConversationParams{ConversationID: res.ConversationID})
	if len(sub.AgentStates) != 1 || sub.AgentStates[0].Agent != "test" || len(sub.AgentStates[0].Commands) == 0 || sub.AgentStates[0].Usage == nil {
		t.Fatalf("late subscriber's agent states %+v", sub.AgentStates)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	var assistants int
	for _, m := range got.Messages {
		if m.Role == transcript.RoleAssistant {
			assistants++
		}
	}
	if assistants != 1 || len(got.Messages) != 2 {
		t.Fatalf("messages %+v", got.Messages)
	}
	if a := got.Messages[1]; a.Agent != "test" || a.Status != transcript.StatusCompleted || !strings.Contains(a.Segments[len(a.Segments)-1].Content, "hello there") {
		t.Fatalf("assistant %+v", a)
	}
}

func TestRealAgentWriteTwoClients(t *testing.T) {
	e := newRealEnv(t)
	a, b := e.dial("a"), e.dial("b")
	conv := call[ConversationResult](t, a, MethodConversationsCreate, CreateConversationParams{})
	call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: conv.Conversation.ID})
	res := call[SendResult](t, a, MethodChatSend, SendParams{ConversationID: conv.Conversation.ID, Agent: "test", Text: `WRITE notes/a.txt line one\nline two\n`})
	var permID string
	logB := collect(t, b, res.TurnID, func(n Notification) {
		if n.Method == NotifyPermission {
			var p PermissionParams
			json.Unmarshal(n.Params, &p)
			permID = p.PermissionID
			if len(p.Options) != 3 {
				t.Errorf("options %+v", p.Options)
			}
			call[struct{}](t, b, MethodPermissionRespond, RespondParams{PermissionID: p.PermissionID, OptionID: "allow"})
		}
	})
	logA := collect(t, a, res.TurnID, nil)
	resolved := false
	for _, n := range logA.others {
		if n.Method == NotifyPermissionResolved {
			var p PermissionResolvedParams
			json.Unmarshal(n.Params, &p)
			resolved = p.PermissionID == permID && p.OptionID == "allow"
		}
	}
	if permID == "" || !resolved {
		t.Fatalf("permission %q resolved %v", permID, resolved)
	}
	if len(logA.events) != len(logB.events) {
		t.Fatalf("a saw %d events, b %d", len(logA.events), len(logB.events))
	}
	data, err := os.ReadFile(filepath.Join(e.ws, "notes", "a.txt"))
	if err != nil || string(data) != "line one\nline two\n" {
		t.Fatalf("file %q %v", data, err)
	}
	got := call[GetConversationResult](t, a, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	var fc, tool *transcript.Segment
	for i, s := range got.Messages[1].Segments {
		if s.Type == transcript.SegFileChange {
			fc = &got.Messages[1].Segments[i]
		}
		if s.Type == transcript.SegTool {
			tool = &got.Messages[1].Segments[i]
		}
	}
	if fc == nil || !strings.HasSuffix(fc.Path, filepath.Join("notes", "a.txt")) || fc.Additions == nil || *fc.Additions != 2 {
		t.Fatalf("fileChange %+v", got.Messages[1].Segments)
	}
	if tool == nil || tool.Status != string(transcript.ToolCompleted) {
		t.Fatalf("tool %+v", tool)
	}
}

func TestRealAgentCancelCrashRestart(t *testing.T) {
	e := newRealEnv(t)
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "test", Text: "SLOW 200"})
	conv := res.ConversationID
	cancelled := false
	log := collect(t, c, res.TurnID, func(n Notification) {
		if n.Method == NotifyEvent && !cancelled {
			cancelled = true
			call[CancelResult](t, c, MethodChatCancel, ConversationParams{ConversationID: conv})
		}
	})
	if log.terminal().StopReason != "cancelled" {
		t.Fatalf("after cancel: %+v", log.terminal())
	}
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Text: "CRASH"})
	log = collect(t, c, res.TurnID, nil)
	if log.terminal().Type != transcript.EvTurnFailed || log.terminal().Message == "" {
		t.Fatalf("after crash: %+v", log.terminal())
	}
	t.Logf("crash message: %s", log.terminal().Message)
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Text: "PLAIN after crash"})
	if log = collect(t, c, res.TurnID, nil); log.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("after respawn: %+v", log.terminal())
	}
	e.restart(func(o *Options) { o.StartAgent, o.LoadRegistry, o.UserConfigDir = nil, nil, e.srv.opts.UserConfigDir })
	c = e.dial("b")
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if len(got.Messages) != 6 {
		t.Fatalf("after restart: %d messages", len(got.Messages))
	}
	wantStatus := []transcript.MessageStatus{"", transcript.StatusCancelled, "", transcript.StatusFailed, "", transcript.StatusCompleted}
	for i, m := range got.Messages {
		if m.Status != wantStatus[i] {
			t.Fatalf("message %d status %q, want %q", i, m.Status, wantStatus[i])
		}
	}
	// The agent (last used: test) loads its stored session in a new process.
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Text: "PLAIN after restart"})
	if log = collect(t, c, res.TurnID, nil); log.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("after restart: %+v", log.terminal())
	}
}

func TestRealAgentSubscribeFlood(t *testing.T) {
	e := newRealEnv(t)
	a, b := e.dial("a"), e.dial("b")
	res := call[SendResult](t, a, MethodChatSend, SendParams{Agent: "test", Text: "FLOOD 20000"})
	for {
		n, err := a.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var p EventParams
		json.Unmarshal(n.Params, &p)
		if p.Event.Seq >= 50 || p.Event.Terminal() {
			break
		}
	}
	sub := call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: res.ConversationID})
	var m transcript.Message
	first := int64(1)
	if sub.Running != nil {
		checkSeq(t, sub.Running.Events, 1)
		for _, ev := range sub.Running.Events {
			transcript.Apply(&m, ev)
		}
		first = sub.Running.LastSeq + 1
		log := collect(t, b, res.TurnID, nil)
		checkSeq(t, log.events, first)
		for _, ev := range log.events {
			transcript.Apply(&m, ev)
		}
	} else {
		t.Log("flood ended before the subscribe")
		m = sub.Messages[1]
	}
	logA := collect(t, a, res.TurnID, nil)
	got := call[GetConversationResult](t, a, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	want := got.Messages[1]
	if len(m.Segments) == 0 || m.Segments[0].Content != want.Segments[0].Content || !strings.HasPrefix(want.Segments[0].Content, "0 1 2 ") {
		t.Fatalf("rebuilt %d chars vs stored %d", len(m.Segments[0].Content), len(want.Segments[0].Content))
	}
	if logA.terminal().Seq != 20001 {
		t.Fatalf("terminal seq %d, want 20001", logA.terminal().Seq)
	}
}

// BenchmarkFloodACP drives one turn of the testagent's FLOOD scenario: ACP
// session/update notifications over a real pipe through package agents and
// the daemon to one socket client, every event once and in order. Reports
// events/s end to end.
func BenchmarkFloodACP(b *testing.B) {
	e := newRealEnv(b)
	c := e.dial("bench")
	n := max(b.N, 10000)
	b.ResetTimer()
	start := time.Now()
	res := call[SendResult](b, c, MethodChatSend, SendParams{Agent: "test", Text: fmt.Sprintf("FLOOD %d", n)})
	log := collect(b, c, res.TurnID, nil)
	el := time.Since(start)
	b.StopTimer()
	checkSeq(b, log.events, 1)
	if len(log.events) != n+1 {
		b.Fatalf("got %d events, want %d", len(log.events), n+1)
	}
	b.ReportMetric(float64(n)/el.Seconds(), "events/s")
}
