package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// multiEnv is a daemon with several scripted testagents configured as user
// agents, each with its own TESTAGENT_STATE, so a test can read exactly what
// every session of every agent was prompted with (sessions.json).
type multiEnv struct {
	*testEnv
	cfg    string
	states map[string]string // agent → state dir
}

// newMultiEnv configures agents "a" and "b" (config options) and "legacy"
// (modes and legacy models only, TESTAGENT_NO_CONFIG=1).
func newMultiEnv(t *testing.T, tweak func(*Options)) *multiEnv {
	bin := testagent(t)
	m := &multiEnv{cfg: t.TempDir(), states: map[string]string{}}
	servers := map[string]any{}
	for _, name := range []string{"a", "b", "legacy"} {
		m.states[name] = t.TempDir()
		env := map[string]string{"TESTAGENT_STATE": m.states[name]}
		if name == "legacy" {
			env["TESTAGENT_NO_CONFIG"] = "1"
		}
		servers[name] = map[string]any{"command": bin, "env": env}
	}
	b, _ := json.Marshal(map[string]any{"agent_servers": servers})
	os.MkdirAll(filepath.Join(m.cfg, "ochat"), 0o700)
	if err := os.WriteFile(filepath.Join(m.cfg, "ochat", "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	m.testEnv = newEnv(t, m.opts(tweak))
	return m
}

func (m *multiEnv) opts(tweak func(*Options)) func(*Options) {
	return func(o *Options) {
		o.StartAgent, o.LoadRegistry, o.UserConfigDir = nil, nil, m.cfg
		if tweak != nil {
			tweak(o)
		}
	}
}

// prompts returns, per session id, every prompt the agent's sessions
// received (each prompt: its blocks, one per line), read from the
// testagent's sessions.json. Closed sessions are absent.
func (m *multiEnv) prompts(agent string) map[string][]string {
	m.t.Helper()
	b, err := os.ReadFile(filepath.Join(m.states[agent], "sessions.json"))
	if err != nil {
		m.t.Fatal(err)
	}
	var sessions map[string]struct {
		Turns []struct {
			User string `json:"user"`
		} `json:"turns"`
	}
	if err := json.Unmarshal(b, &sessions); err != nil {
		m.t.Fatal(err)
	}
	out := map[string][]string{}
	for id, s := range sessions {
		for _, tr := range s.Turns {
			out[id] = append(out[id], tr.User)
		}
	}
	return out
}

// sessionOf is the stored session id of agent in conv.
func (m *multiEnv) sessionOf(conv, agent string) string {
	m.t.Helper()
	as, err := m.store.AgentSession(conv, agent)
	if err != nil {
		m.t.Fatalf("agent session %s/%s: %v", conv, agent, err)
	}
	return as.SessionID
}

// answer runs one turn to its end and returns its result, terminal event
// and answered text.
func answer(t *testing.T, c *Client, method string, params any) (SendResult, transcript.Event, string) {
	t.Helper()
	res := call[SendResult](t, c, method, params)
	log := collect(t, c, res.TurnID, nil)
	checkSeq(t, log.events, 1)
	text := ""
	for _, ev := range log.events {
		if ev.Type == transcript.EvContentDelta {
			text += ev.Delta
		}
	}
	return res, log.terminal(), text
}

func mustComplete(t *testing.T, what string, term transcript.Event) {
	t.Helper()
	if term.Type != transcript.EvTurnCompleted || term.StopReason != "end_turn" {
		t.Fatalf("%s ended with %+v", what, term)
	}
}

// TestHandoffBetweenAgents alternates a → b → a → b, restarts the daemon
// and goes on with a: every agent is prompted with each user text it has
// not seen exactly once (no duplicate, no gap), a new session with the whole
// conversation, a live or loaded one with only what came after its cursor.
func TestHandoffBetweenAgents(t *testing.T) {
	m := newMultiEnv(t, nil)
	c := m.dial("x")
	steps := []struct{ agent, word string }{{"a", "alpha"}, {"b", "beta"}, {"a", "gamma"}, {"b", "delta"}}
	conv := ""
	for _, st := range steps {
		res, term, text := answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: st.agent, Text: "PLAIN " + st.word})
		conv = res.ConversationID
		mustComplete(t, st.word, term)
		if text != st.word {
			t.Fatalf("%s answered %q", st.agent, text)
		}
	}
	m.restart(m.opts(nil))
	c = m.dial("y")
	_, term, _ := answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "PLAIN epsilon"})
	mustComplete(t, "epsilon after restart", term)

	want := map[string][][]string{
		// a: its own first prompt; then b's turn; after the restart (load
		// of the same session) b's second turn.
		"a": {{"PLAIN alpha"}, {"PLAIN beta", "PLAIN gamma"}, {"PLAIN delta", "PLAIN epsilon"}},
		// b: new session, so the whole conversation; then a's second turn.
		"b": {{"PLAIN alpha", "PLAIN beta"}, {"PLAIN gamma", "PLAIN delta"}},
	}
	all := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	for agent, turns := range want {
		ps := m.prompts(agent)
		sid := m.sessionOf(conv, agent)
		got := ps[sid]
		if len(ps) != 1 || len(got) != len(turns) {
			t.Fatalf("%s: sessions %v, want one session (%s) with %d prompts", agent, ps, sid, len(turns))
		}
		for i, p := range got {
			for _, w := range all {
				n := strings.Count(p, "PLAIN "+w)
				wantN := 0
				for _, x := range turns[i] {
					if x == "PLAIN "+w {
						wantN = 1
					}
				}
				if n != wantN {
					t.Errorf("%s prompt %d carries %q %d times, want %d:\n%s", agent, i+1, "PLAIN "+w, n, wantN, p)
				}
			}
			if i > 0 || agent == "b" {
				if !strings.HasPrefix(p, "<handoff>") {
					t.Errorf("%s prompt %d does not start with the handoff block:\n%s", agent, i+1, p)
				}
			}
		}
	}
	// Other agents' answers are in the handoff, attributed.
	if p := m.prompts("b")[m.sessionOf(conv, "b")][0]; !strings.Contains(p, "[a]\nalpha") {
		t.Errorf("b's first prompt lacks a's answer:\n%s", p)
	}
	// The cursor of each agent is its last answer.
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	last := map[string]string{}
	for _, msg := range got.Messages {
		if msg.Role == transcript.RoleAssistant {
			last[msg.Agent] = msg.ID
		}
	}
	for _, agent := range []string{"a", "b"} {
		as, _ := m.store.AgentSession(conv, agent)
		if as.Cursor != last[agent] {
			t.Errorf("%s cursor %s, want its last answer %s", agent, as.Cursor, last[agent])
		}
	}
}

// noLoadConn hides loadSession so that the daemon reopens with
// session/resume.
type noLoadConn struct{ *agents.Conn }

func (c noLoadConn) Capabilities() acp.AgentCapabilities {
	caps := c.Conn.Capabilities()
	caps.LoadSession = false
	return caps
}

// failLoadConn answers session/load with an error, as gemini-cli 0.61 does
// within the minute a session was created.
type failLoadConn struct{ *agents.Conn }

func (c failLoadConn) LoadSession(ctx context.Context, id string) (agents.SessionInfo, error) {
	return agents.SessionInfo{}, errors.New("No previous sessions found for this project.")
}

// TestHandoffResume: an agent without loadSession, or whose session/load
// fails, but that has resume is reopened by session/resume after a daemon
// restart and gets only what it has not seen.
func TestHandoffResume(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*agents.Conn) AgentConn
	}{
		{"no load", func(c *agents.Conn) AgentConn { return noLoadConn{c} }},
		{"load fails", func(c *agents.Conn) AgentConn { return failLoadConn{c} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := func(o *Options) {
				o.StartAgent = func(ctx context.Context, spec agents.Spec, ao agents.Options) (AgentConn, error) {
					c, err := agents.Start(ctx, spec, ao)
					if err != nil {
						return nil, err
					}
					return tc.wrap(c), nil
				}
			}
			m := newMultiEnv(t, start)
			c := m.dial("x")
			res, term, _ := answer(t, c, MethodChatSend, SendParams{Agent: "a", Text: "PLAIN one"})
			mustComplete(t, "one", term)
			conv := res.ConversationID
			_, term, _ = answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "b", Text: "PLAIN two"})
			mustComplete(t, "two", term)
			sid := m.sessionOf(conv, "a")
			m.restart(m.opts(start))
			c = m.dial("y")
			_, term, _ = answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "PLAIN three"})
			mustComplete(t, "three", term)
			if got := m.sessionOf(conv, "a"); got != sid {
				t.Fatalf("a's session %s after restart, want %s resumed", got, sid)
			}
			p := m.prompts("a")[sid]
			if len(p) != 2 || strings.Contains(p[1], "PLAIN one") || !strings.Contains(p[1], "PLAIN two") || !strings.HasSuffix(p[1], "PLAIN three") {
				t.Fatalf("a's prompts after resume: %q", p)
			}
		})
	}
}

// TestEditDropsTurns: an edit drops the edited message and every later
// one, closes the sessions that saw them and starts new ones; the dropped
// text never reaches an agent again.
func TestEditDropsTurns(t *testing.T) {
	m := newMultiEnv(t, nil)
	c := m.dial("x")
	res, term, _ := answer(t, c, MethodChatSend, SendParams{Agent: "a", Text: "PLAIN keep-one"})
	mustComplete(t, "keep", term)
	conv := res.ConversationID
	dropped, term, _ := answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "b", Text: "PLAIN dropped-xyz"})
	mustComplete(t, "dropped", term)
	_, term, _ = answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "PLAIN after-drop"})
	mustComplete(t, "after", term)
	oldA, oldB := m.sessionOf(conv, "a"), m.sessionOf(conv, "b")

	// Errors first: nothing is dropped by them.
	callErr(t, c, MethodChatEdit, EditParams{ConversationID: conv, MessageID: dropped.AssistantMessageID, Text: "x"}, jsonrpc2.InvalidParams)
	callErr(t, c, MethodChatEdit, EditParams{ConversationID: conv, MessageID: "nope", Text: "x"}, CodeNotFound)
	callErr(t, c, MethodChatEdit, EditParams{ConversationID: "nope", MessageID: dropped.UserMessageID, Text: "x"}, CodeNotFound)
	callErr(t, c, MethodChatEdit, EditParams{ConversationID: conv, MessageID: dropped.UserMessageID, Text: "  "}, jsonrpc2.InvalidParams)
	if got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv}); len(got.Messages) != 6 {
		t.Fatalf("bad edits changed the conversation: %d messages", len(got.Messages))
	}

	// Another client watching the conversation is told to re-subscribe.
	watcher := m.dial("watcher")
	call[SubscribeResult](t, watcher, MethodSubscribe, ConversationParams{ConversationID: conv})

	// The edit keeps b (the agent that answered the edited message).
	ed, term, text := answer(t, c, MethodChatEdit, EditParams{ConversationID: conv, MessageID: dropped.UserMessageID, Text: "ECHOALL replaced"})
	mustComplete(t, "edit", term)
	if ed.ConversationID != conv || ed.UserMessageID == dropped.UserMessageID {
		t.Fatalf("edit result %+v", ed)
	}
	if !strings.Contains(text, "keep-one") || strings.Contains(text, "dropped-xyz") || strings.Contains(text, "after-drop") {
		t.Fatalf("b's prompt after the edit:\n%s", text)
	}
	n, err := watcher.Next(ctxT(t))
	if err != nil || n.Method != NotifyResync {
		t.Fatalf("watcher got %+v, %v; want ochat/resync", n, err)
	}
	if sub := call[SubscribeResult](t, watcher, MethodSubscribe, ConversationParams{ConversationID: conv}); len(sub.Messages) != 4 || sub.Running != nil {
		t.Fatalf("watcher's new snapshot: %+v", sub.Messages)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	var texts []string
	for _, msg := range got.Messages {
		if msg.Role == transcript.RoleUser {
			texts = append(texts, msg.Content)
		} else {
			texts = append(texts, msg.Agent)
		}
	}
	if strings.Join(texts, "|") != "PLAIN keep-one|a|ECHOALL replaced|b" {
		t.Fatalf("after edit: %q", texts)
	}
	// a's old session saw the dropped turn: the next prompt to a goes to a
	// new session with the whole (kept) conversation.
	_, term, text = answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "ECHOALL final"})
	mustComplete(t, "final", term)
	if strings.Contains(text, "dropped-xyz") || strings.Contains(text, "after-drop") || !strings.Contains(text, "keep-one") || !strings.Contains(text, "replaced") {
		t.Fatalf("a's prompt after the edit:\n%s", text)
	}
	newA, newB := m.sessionOf(conv, "a"), m.sessionOf(conv, "b")
	if newA == oldA || newB == oldB {
		t.Fatalf("sessions not replaced: a %s→%s, b %s→%s", oldA, newA, oldB, newB)
	}
	// The old sessions were closed (session/close removes them from the
	// testagent's state); nothing any live session holds mentions the
	// dropped text.
	for _, agent := range []string{"a", "b"} {
		ps := m.prompts(agent)
		if _, ok := ps[map[string]string{"a": oldA, "b": oldB}[agent]]; ok {
			t.Errorf("%s's old session is still open", agent)
		}
		for id, p := range ps {
			if strings.Contains(strings.Join(p, "\n"), "dropped-xyz") {
				t.Errorf("%s session %s holds the dropped text", agent, id)
			}
		}
	}
}

// TestRetry regenerates an answer with another agent, by the assistant's id
// and by the user message's id.
func TestRetry(t *testing.T) {
	m := newMultiEnv(t, nil)
	c := m.dial("x")
	first, term, _ := answer(t, c, MethodChatSend, SendParams{Agent: "a", Text: "PLAIN one"})
	mustComplete(t, "one", term)
	conv := first.ConversationID
	second, term, _ := answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "ECHOALL two"})
	mustComplete(t, "two", term)

	callErr(t, c, MethodChatRetry, RetryParams{ConversationID: conv, MessageID: "nope"}, CodeNotFound)
	callErr(t, c, MethodChatRetry, RetryParams{ConversationID: conv}, jsonrpc2.InvalidParams)

	re, term, text := answer(t, c, MethodChatRetry, RetryParams{ConversationID: conv, MessageID: second.AssistantMessageID, Agent: "b"})
	mustComplete(t, "retry", term)
	// b is new: the whole kept conversation, then the same prompt, once.
	if !strings.Contains(text, "PLAIN one") || strings.Count(text, "ECHOALL two") != 1 || !strings.HasSuffix(text, "ECHOALL two") {
		t.Fatalf("b's prompt on retry:\n%s", text)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if len(got.Messages) != 4 || got.Messages[2].ID != re.UserMessageID || got.Messages[2].Content != "ECHOALL two" ||
		got.Messages[3].ID != re.AssistantMessageID || got.Messages[3].Agent != "b" {
		t.Fatalf("after retry: %+v", got.Messages)
	}
	// Retry by the user message: the agent defaults to the one that
	// answered it (b).
	re2, term, _ := answer(t, c, MethodChatRetry, RetryParams{ConversationID: conv, MessageID: re.UserMessageID})
	mustComplete(t, "retry by user", term)
	got = call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if len(got.Messages) != 4 || got.Messages[3].ID != re2.AssistantMessageID || got.Messages[3].Agent != "b" {
		t.Fatalf("after retry by user message: %+v", got.Messages)
	}
	// A retry while a turn runs is a conflict.
	slow := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "SLOW 40"})
	callErr(t, c, MethodChatRetry, RetryParams{ConversationID: conv, MessageID: re2.UserMessageID}, CodeConflict)
	// Once the prompt is out, a's cursor is at its user message; at the
	// end it is past the answer.
	checked := false
	collect(t, c, slow.TurnID, func(n Notification) {
		if n.Method == NotifyEvent && !checked {
			checked = true
			if as, _ := m.store.AgentSession(conv, "a"); as.Cursor != slow.UserMessageID {
				t.Errorf("cursor mid-turn %s, want the user message %s", as.Cursor, slow.UserMessageID)
			}
		}
	})
	if as, _ := m.store.AgentSession(conv, "a"); as.Cursor != slow.AssistantMessageID {
		t.Errorf("cursor after the turn %s, want the answer %s", as.Cursor, slow.AssistantMessageID)
	}
}

// configOf reads "mode=… model=…" from a CONFIG turn.
func configOf(t *testing.T, c *Client, conv, agent string) string {
	t.Helper()
	_, term, text := answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: agent, Text: "CONFIG"})
	mustComplete(t, "CONFIG", term)
	return text
}

// TestSetConfig: a value set on a live session is applied at once,
// reported as agent state and remembered; it is replayed into every new
// session (after an edit, after a restart), for an agent with config
// options and for one with legacy modes/models only; a value set before
// any session is applied to the first one.
func TestSetConfig(t *testing.T) {
	m := newMultiEnv(t, nil)
	c := m.dial("x")
	res, term, _ := answer(t, c, MethodChatSend, SendParams{Agent: "a", Text: "PLAIN hi"})
	mustComplete(t, "hi", term)
	conv := res.ConversationID

	sc := call[SetConfigResult](t, c, MethodAgentSetConfig, map[string]any{"conversationId": conv, "agent": "a", "configId": "mode", "value": "plan"})
	if !sc.Applied || sc.Config["mode"] != "plan" {
		t.Fatalf("setConfig result %+v", sc)
	}
	if v, ok := configValue(sc.State, "mode"); !ok || v != "plan" {
		t.Fatalf("state after setConfig: %+v", sc.State)
	}
	// The subscriber (the sender) hears the change.
	var st AgentStateParams
	ctx := ctxT(t)
	for st.Agent == "" {
		n, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Method == NotifyAgentState {
			json.Unmarshal(n.Params, &st)
			if v, _ := configValue(st.State, "mode"); v != "plan" {
				st = AgentStateParams{}
			}
		}
	}
	call[SetConfigResult](t, c, MethodAgentSetConfig, SetConfigParams{ConversationID: conv, Agent: "a", ConfigID: "model", Value: json.RawMessage(`"smart"`)})
	if got := configOf(t, c, conv, "a"); got != "mode=plan model=smart" {
		t.Fatalf("live session config %q", got)
	}
	// Refused values and bad params.
	msg := callErr(t, c, MethodAgentSetConfig, SetConfigParams{ConversationID: conv, Agent: "a", ConfigID: "mode", Value: json.RawMessage(`"bogus"`)}, jsonrpc2.InvalidParams)
	if !strings.Contains(msg, "refused") {
		t.Errorf("refusal message %q", msg)
	}
	callErr(t, c, MethodAgentSetConfig, SetConfigParams{ConversationID: conv, Agent: "zzz", ConfigID: "mode", Value: json.RawMessage(`"plan"`)}, CodeAgentUnavailable)
	callErr(t, c, MethodAgentSetConfig, SetConfigParams{ConversationID: "nope", Agent: "a", ConfigID: "mode", Value: json.RawMessage(`"plan"`)}, CodeNotFound)
	callErr(t, c, MethodAgentSetConfig, map[string]any{"conversationId": conv, "agent": "a", "configId": "mode", "value": 3}, jsonrpc2.InvalidParams)

	// Before any session of "legacy" (modes + legacy models, no config
	// options): remembered, then applied to its first session through
	// session/set_mode and session/set_model.
	sc = call[SetConfigResult](t, c, MethodAgentSetConfig, SetConfigParams{ConversationID: conv, Agent: "legacy", ConfigID: "mode", Value: json.RawMessage(`"plan"`)})
	if sc.Applied {
		t.Fatalf("applied without a session: %+v", sc)
	}
	call[SetConfigResult](t, c, MethodAgentSetConfig, SetConfigParams{ConversationID: conv, Agent: "legacy", ConfigID: "model", Value: json.RawMessage(`"smart"`)})
	if got := configOf(t, c, conv, "legacy"); got != "mode=plan model=smart" {
		t.Fatalf("legacy first session config %q", got)
	}
	al := call[AgentsListResult](t, c, MethodAgentsList, AgentsListParams{ConversationID: conv})
	if len(al.States) != 2 || al.States[0].Agent != "a" || !al.States[0].Live || al.States[0].Config["model"] != "smart" || al.States[1].Agent != "legacy" {
		t.Fatalf("agents/list states %+v", al.States)
	}
	if v, _ := configValue(al.States[1].State, "model"); v != "smart" {
		t.Fatalf("legacy state %+v", al.States[1].State)
	}

	// Restart, then a retry (new sessions for every agent): replayed.
	m.restart(m.opts(nil))
	c = m.dial("y")
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	_, term, _ = answer(t, c, MethodChatRetry, RetryParams{ConversationID: conv, MessageID: got.Messages[len(got.Messages)-1].ID, Agent: "a"})
	mustComplete(t, "retry", term)
	if got := configOf(t, c, conv, "a"); got != "mode=plan model=smart" {
		t.Fatalf("config replayed into a new session after restart: %q", got)
	}
	if got := configOf(t, c, conv, "legacy"); got != "mode=plan model=smart" {
		t.Fatalf("legacy config replayed after restart: %q", got)
	}
}

// TestSetConfigValue decodes the value param: a string or a boolean.
func TestSetConfigValue(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		ok        bool
	}{
		{`"plan"`, "plan", true},
		{`true`, "true", true},
		{`false`, "false", true},
		{`""`, "", false},
		{`3`, "", false},
		{``, "", false},
		{`null`, "", false},
		{`{"a":1}`, "", false},
	} {
		p := SetConfigParams{ConversationID: "c", Agent: "a", ConfigID: "x", Value: json.RawMessage(tc.raw)}
		err := p.validate()
		if (err == nil) != tc.ok || p.value != tc.want {
			t.Errorf("value %s: got %q, %v; want %q ok=%v", tc.raw, p.value, err, tc.want, tc.ok)
		}
	}
}

// TestRecoveryHang: an agent that stops answering (HANG ignores
// session/cancel) is cancelled after the idle timeout, its process group is
// killed after the grace (its child too), and the next send respawns it
// and continues the conversation through session/load.
func TestRecoveryHang(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	m := newMultiEnv(t, func(o *Options) { o.TurnIdleTimeout = 300 * time.Millisecond; o.CancelGrace = 300 * time.Millisecond })
	// a's process starts a child that shares its process group.
	b, _ := os.ReadFile(filepath.Join(m.cfg, "ochat", "settings.json"))
	var settings map[string]map[string]map[string]any
	json.Unmarshal(b, &settings)
	settings["agent_servers"]["a"]["env"].(map[string]any)["TESTAGENT_CHILD_PIDFILE"] = pidfile
	b, _ = json.Marshal(settings)
	os.WriteFile(filepath.Join(m.cfg, "ochat", "settings.json"), b, 0o600)

	c := m.dial("x")
	res, term, _ := answer(t, c, MethodChatSend, SendParams{Agent: "a", Text: "PLAIN before"})
	mustComplete(t, "before", term)
	conv := res.ConversationID
	sid := m.sessionOf(conv, "a")
	_, term, text := answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "HANG"})
	if term.Type != transcript.EvTurnFailed || !strings.Contains(term.Message, "turn idle timeout") || text != "hanging" {
		t.Fatalf("hung turn ended with %+v, text %q", term, text)
	}
	pid, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the agent's child to be killed with its process group", func() bool {
		_, err := os.Stat("/proc/" + strings.TrimSpace(string(pid)))
		return err != nil
	})
	res, term, _ = answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "PLAIN after"})
	mustComplete(t, "after", term)
	if got := m.sessionOf(conv, "a"); got != sid {
		t.Fatalf("session %s after respawn, want %s loaded", got, sid)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if len(got.Messages) != 6 || got.Messages[3].Status != transcript.StatusFailed {
		t.Fatalf("messages after the hang: %+v", got.Messages)
	}
}

// TestRecoveryCrashHandoff: agent a dies mid-turn; the turn fails naming the
// exit and keeps what arrived; b then answers with a handoff that includes
// the partial answer, and a continues in its loaded session.
func TestRecoveryCrashHandoff(t *testing.T) {
	m := newMultiEnv(t, nil)
	c := m.dial("x")
	res, term, _ := answer(t, c, MethodChatSend, SendParams{Agent: "a", Text: "PLAIN first"})
	mustComplete(t, "first", term)
	conv := res.ConversationID
	crash, term, _ := answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "CRASH"})
	if term.Type != transcript.EvTurnFailed || !strings.Contains(term.Message, "exit status 3") {
		t.Fatalf("crash turn ended with %+v", term)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if m := got.Messages[3]; m.ID != crash.AssistantMessageID || m.Status != transcript.StatusFailed || transcript.MergeContent(m.Segments) == "" {
		t.Fatalf("stored crash turn %+v", m)
	}
	_, term, text := answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "b", Text: "ECHOALL"})
	mustComplete(t, "b", term)
	if !strings.Contains(text, "[a] (failed: ") || !strings.Contains(text, "exit status 3") || !strings.Contains(text, "about to crash") {
		t.Fatalf("b's handoff lacks a's failed turn:\n%s", text)
	}
	_, term, _ = answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "b", Text: "PLAIN bee"})
	mustComplete(t, "b again", term)
	// a (respawned, session loaded, cursor past its failed turn) gets b's
	// two turns only: the first turn and the crash appear just once, inside
	// b's echo.
	_, term, text = answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "ECHOALL"})
	mustComplete(t, "a again", term)
	if strings.Count(text, "[user]\nPLAIN first") != 1 || strings.Count(text, "[user]\nCRASH") != 1 || !strings.Contains(text, "[user]\nPLAIN bee\n\n[b]\nbee") {
		t.Fatalf("a's prompt after respawn (should hold b's turn only):\n%s", text)
	}
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInterruptedTurnHandoff: the daemon died mid-turn (the store holds
// the user message and a streaming answer; the agent's cursor is at the
// user message, where it moves when the prompt is sent). On restart the
// answer is marked interrupted, and the next prompt to that agent hands off
// the cut answer, marked, but not the user's text it already had.
func TestInterruptedTurnHandoff(t *testing.T) {
	m := newMultiEnv(t, nil)
	c := m.dial("x")
	res, term, _ := answer(t, c, MethodChatSend, SendParams{Agent: "a", Text: "PLAIN first"})
	mustComplete(t, "first", term)
	conv := res.ConversationID
	m.stop()
	// What a daemon killed mid-turn leaves behind (its last checkpoint).
	st, err := history.Open(m.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	u := transcript.Message{ID: m.srv.newID(), Role: transcript.RoleUser, Content: "PLAIN cut short"}
	a := transcript.Message{ID: m.srv.newID(), Role: transcript.RoleAssistant, Agent: "a", Status: transcript.StatusStreaming,
		Segments: []transcript.Segment{{Type: transcript.SegContent, Content: "partial words"}}}
	if err := st.PutMessage(conv, u, nowMs()); err != nil {
		t.Fatal(err)
	}
	if err := st.PutMessage(conv, a, nowMs()); err != nil {
		t.Fatal(err)
	}
	as, err := st.AgentSession(conv, "a")
	if err != nil {
		t.Fatal(err)
	}
	as.Cursor = u.ID
	if err := st.PutAgentSession(conv, "a", as); err != nil {
		t.Fatal(err)
	}
	st.Close()
	m.start(m.opts(nil)) // marks it interrupted, as ochatd serve does
	c = m.dial("y")
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if len(got.Messages) != 4 || got.Messages[3].Status != transcript.StatusInterrupted {
		t.Fatalf("after restart: %+v", got.Messages)
	}
	_, term, text := answer(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "a", Text: "ECHOALL"})
	mustComplete(t, "after restart", term)
	if strings.Contains(text, "PLAIN cut short") || !strings.Contains(text, "[a] (interrupted)\npartial words") || strings.Contains(text, "PLAIN first") {
		t.Fatalf("prompt after the interrupted turn:\n%s", text)
	}
}

// TestAgentStateForwarded: slash commands, config options, modes, usage and
// the session title the agent reports reach the subscribers as
// ochat/agentState, and agents/list with the conversation shows them merged.
func TestAgentStateForwarded(t *testing.T) {
	m := newMultiEnv(t, nil)
	c := m.dial("x")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "a", Text: "PLAIN hi there"})
	var merged agents.State
	collect(t, c, res.TurnID, func(n Notification) {
		if n.Method != NotifyAgentState {
			return
		}
		var p AgentStateParams
		if err := json.Unmarshal(n.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.ConversationID != res.ConversationID || p.Agent != "a" {
			t.Errorf("agentState for %s/%s", p.ConversationID, p.Agent)
		}
		merged.Merge(p.State)
	})
	check := func(what string, st agents.State) {
		t.Helper()
		if len(st.Commands) != 2 || st.Usage == nil || st.Usage.Used != 10 || st.Usage.Size != 1000 ||
			!strings.Contains(st.Title, "PLAIN hi there") || st.Modes == nil {
			t.Fatalf("%s: %+v", what, st)
		}
		if v, _ := configValue(st, "model"); v != "fast" {
			t.Fatalf("%s: model %q", what, v)
		}
	}
	check("merged notifications", merged)
	al := call[AgentsListResult](t, c, MethodAgentsList, AgentsListParams{ConversationID: res.ConversationID})
	if len(al.States) != 1 || !al.States[0].Live {
		t.Fatalf("agents/list states %+v", al.States)
	}
	check("agents/list", al.States[0].State)
}

// TestUnseenMessages: a fresh session sees everything; otherwise the
// messages whose id sorts after the cursor, even when the cursor's own
// message is gone.
func TestUnseenMessages(t *testing.T) {
	msgs := []transcript.Message{{ID: "01B"}, {ID: "01D"}, {ID: "01F"}, {ID: "01H"}}
	ids := func(ms []transcript.Message) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		fresh  bool
		cursor string
		want   string
	}{
		{true, "01D", "01B,01D,01F,01H"},
		{false, "", "01B,01D,01F,01H"},
		{false, "01D", "01F,01H"},
		{false, "01E", "01F,01H"}, // the cursor's message was dropped
		{false, "01H", ""},
		{false, "01A", "01B,01D,01F,01H"},
	} {
		if got := ids(unseenMessages(msgs, tc.fresh, tc.cursor)); got != tc.want {
			t.Errorf("fresh=%v cursor=%s: %q, want %q", tc.fresh, tc.cursor, got, tc.want)
		}
	}
}
