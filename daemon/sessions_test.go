package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/history/native"
	"github.com/ochat-dev/ochat/transcript"
)

const (
	fixtureClaudeID = "24cb974b-077a-4ab3-bdf4-622ee8278cca"
	fixtureCodexID  = "01a22bc2-94f0-7343-bc9a-974a49e6be4e"
	fixtureCwd      = "/home/dev/project"
)

// nativeHome is a private HOME with a Claude config dir and a Codex home
// holding the recorded fixtures, rewritten to belong to workspace ws.
type nativeHome struct {
	env        native.Env
	claudeFile string
	codexFile  string
}

func newNativeHome(t testing.TB, ws string) *nativeHome {
	t.Helper()
	home := t.TempDir()
	h := &nativeHome{env: native.Env{
		Home:            home,
		ClaudeConfigDir: filepath.Join(home, "claude-config"),
		CodexHome:       filepath.Join(home, "codex-home"),
	}}
	dir, _ := native.ClaudeProjectDirName(ws)
	h.claudeFile = filepath.Join(h.env.ClaudeConfigDir, "projects", dir, fixtureClaudeID+".jsonl")
	copyFixture(t, "testdata/native/claude/"+fixtureClaudeID+".jsonl", h.claudeFile, ws)
	h.codexFile = filepath.Join(h.env.CodexHome, "sessions", "2026", "11", "30", "rollout-2026-11-30T09-21-42-"+fixtureCodexID+".jsonl")
	copyFixture(t, "testdata/native/codex/rollout-2026-11-30T09-21-42-"+fixtureCodexID+".jsonl", h.codexFile, ws)
	return h
}

func copyFixture(t testing.TB, src, dst, ws string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.ReplaceAll(string(b), fixtureCwd, ws))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// newSessionsEnv is a daemon with fake agents whose native stores are a
// private home with the fixtures.
func newSessionsEnv(t testing.TB) (*testEnv, *nativeHome) {
	t.Helper()
	var nh *nativeHome
	e := newEnv(t, func(o *Options) {
		nh = newNativeHome(t, o.Workspace)
		o.NativeEnv = &nh.env
	})
	return e, nh
}

func findEntry(list []SessionEntry, kind, id string) *SessionEntry {
	for i := range list {
		if list[i].Kind == kind && list[i].ID == id {
			return &list[i]
		}
	}
	return nil
}

func TestSessionsList(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	conv := call[ConversationResult](t, c, MethodConversationsCreate, CreateConversationParams{Title: "mine"})

	res := call[SessionsListResult](t, c, MethodSessionsList, nil)
	cl := findEntry(res.Sessions, SessionKindNative, fixtureClaudeID)
	cx := findEntry(res.Sessions, SessionKindNative, fixtureCodexID)
	own := findEntry(res.Sessions, SessionKindConversation, conv.Conversation.ID)
	if cl == nil || cx == nil || own == nil {
		t.Fatalf("listing lacks claude %v, codex %v or the conversation %v: %+v", cl != nil, cx != nil, own != nil, res.Sessions)
	}
	tests := []struct {
		e     *SessionEntry
		agent string
		path  string
	}{
		{cl, "claude", nh.claudeFile},
		{cx, "codex", nh.codexFile},
	}
	for _, tc := range tests {
		if tc.e.Agent != tc.agent || tc.e.Path != tc.path || tc.e.Cwd != e.ws || tc.e.Title == "" ||
			tc.e.MessageCount == 0 || tc.e.CreatedAt == 0 || tc.e.UpdatedAt < tc.e.CreatedAt || len(tc.e.ResumeCommand) == 0 {
			t.Errorf("%s entry %+v", tc.agent, *tc.e)
		}
	}
	if cl.ResumeCommand[0] != "claude" || cl.ResumeCommand[len(cl.ResumeCommand)-1] != fixtureClaudeID {
		t.Errorf("claude resume %v", cl.ResumeCommand)
	}
	if cl.ToolCount != 1 {
		t.Errorf("claude toolCount %d, want 1 (one Write)", cl.ToolCount)
	}
	if own.Title != "mine" || own.Live {
		t.Errorf("conversation entry %+v", *own)
	}
	for i := 1; i < len(res.Sessions); i++ {
		if res.Sessions[i].UpdatedAt > res.Sessions[i-1].UpdatedAt {
			t.Fatalf("not newest first at %d: %+v", i, res.Sessions)
		}
	}
	// stores that do not exist are info diagnostics, not errors
	for _, d := range res.Diagnostics {
		if d.Level != "info" {
			t.Errorf("diagnostic %+v", d)
		}
	}

	// Warm listing: nothing parsed again.
	cold := e.srv.native.parsed.Load()
	if cold < 2 {
		t.Fatalf("cold listing parsed %d files, want ≥ 2", cold)
	}
	res2 := call[SessionsListResult](t, c, MethodSessionsList, nil)
	if n := e.srv.native.parsed.Load() - cold; n != 0 {
		t.Fatalf("warm listing parsed %d files", n)
	}
	if len(res2.Sessions) != len(res.Sessions) {
		t.Fatalf("warm listing has %d sessions, cold %d", len(res2.Sessions), len(res.Sessions))
	}
	// One file changes: exactly that one is parsed again, and it is live.
	appendLine(t, nh.claudeFile, claudeUserLine(e.ws, "one more question", time.Now()))
	res3 := call[SessionsListResult](t, c, MethodSessionsList, nil)
	if n := e.srv.native.parsed.Load() - cold; n != 1 {
		t.Fatalf("listing after one append parsed %d files, want 1", n)
	}
	if cl3 := findEntry(res3.Sessions, SessionKindNative, fixtureClaudeID); cl3 == nil || !cl3.Live || cl3.MessageCount != cl.MessageCount+1 {
		t.Fatalf("appended session %+v", cl)
	}
	// The old cache entry of the changed file was pruned (in bbolt too).
	e.srv.native.cache.flushes.Wait()
	n := 0
	e.store.ForEachIndexEntry(func(k string, _ []byte) error {
		if strings.Contains(k, fixtureClaudeID) {
			n++
		}
		return nil
	})
	if n != 1 {
		t.Errorf("%d cache entries for the claude file, want 1", n)
	}
	// After a restart the bbolt entries serve the listing: nothing parsed.
	e.restart(func(o *Options) { o.NativeEnv = &nh.env })
	c = e.dial("b")
	res4 := call[SessionsListResult](t, c, MethodSessionsList, nil)
	if p := e.srv.native.parsed.Load(); p != 0 || len(res4.Sessions) != len(res3.Sessions) {
		t.Fatalf("listing after restart parsed %d files, listed %d (want 0, %d)", p, len(res4.Sessions), len(res3.Sessions))
	}
}

func appendLine(t testing.TB, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

var lineSeq int

// claudeUserLine is a Claude Code user prompt line continuing the fixture.
func claudeUserLine(ws, text string, at time.Time) string {
	lineSeq++
	b, _ := json.Marshal(map[string]any{
		"parentUuid": nil, "isSidechain": false, "type": "user", "userType": "external",
		"message": map[string]any{"role": "user", "content": text},
		"uuid":    fmt.Sprintf("00000000-0000-4000-8000-%012d", lineSeq), "timestamp": at.UTC().Format(time.RFC3339Nano),
		"cwd": ws, "sessionId": fixtureClaudeID, "version": "2.1.83", "gitBranch": "main",
	})
	return string(b)
}

// nextNote waits for a notification of method.
func nextNote(t testing.TB, c *Client, method string) Notification {
	t.Helper()
	ctx := ctxT(t)
	for {
		n, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", method, err)
		}
		if n.Method == method {
			return n
		}
	}
}

func TestSessionsFollow(t *testing.T) {
	e, nh := newSessionsEnv(t)
	a, b := e.dial("a"), e.dial("b")
	call[SessionsListResult](t, b, MethodSessionsList, nil)
	f := call[FollowResult](t, a, MethodSessionsFollow, SessionRefParams{Path: nh.claudeFile})
	if f.SessionID != fixtureClaudeID || f.Agent != "claude" || len(f.Messages) == 0 {
		t.Fatalf("follow result %+v", f)
	}
	// A second follower by id gets the same transcript.
	f2 := call[FollowResult](t, b, MethodSessionsFollow, SessionRefParams{SessionID: fixtureClaudeID})
	if f2.Path != nh.claudeFile || len(f2.Messages) != len(f.Messages) {
		t.Fatalf("second follow %d messages at %s, first %d", len(f2.Messages), f2.Path, len(f.Messages))
	}
	list := call[SessionsListResult](t, b, MethodSessionsList, nil)
	if cl := findEntry(list.Sessions, SessionKindNative, fixtureClaudeID); cl == nil || !cl.Live {
		t.Fatalf("followed session not live: %+v", cl)
	}

	appendLine(t, nh.claudeFile, claudeUserLine(e.ws, "typed in the terminal", time.Now()))
	for _, c := range []*Client{a, b} {
		n := nextNote(t, c, NotifySessionAppended)
		var p SessionAppendedParams
		if err := json.Unmarshal(n.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.SessionID != fixtureClaudeID || p.Path != nh.claudeFile || p.Reset || len(p.Messages) != 1 ||
			p.Messages[0].Role != transcript.RoleUser || p.Messages[0].Content != "typed in the terminal" || p.SeenAt == 0 {
			t.Fatalf("appended %+v", p)
		}
	}
	n := nextNote(t, b, NotifySessionsChanged)
	var ch SessionsChangedParams
	json.Unmarshal(n.Params, &ch)
	if len(ch.Paths) != 1 || ch.Paths[0] != nh.claudeFile {
		t.Fatalf("changed %+v", ch)
	}

	// After unfollow, a no longer gets appends; b still does.
	call[struct{}](t, a, MethodSessionsUnfollow, SessionRefParams{Path: nh.claudeFile})
	appendLine(t, nh.claudeFile, claudeUserLine(e.ws, "second line", time.Now()))
	n = nextNote(t, b, NotifySessionAppended)
	var p SessionAppendedParams
	json.Unmarshal(n.Params, &p)
	if len(p.Messages) != 1 || p.Messages[0].Content != "second line" {
		t.Fatalf("appended %+v", p)
	}
	// b has seen the append, so a would have it queued by now if it were
	// still following; a round trip orders a's queue after it.
	call[SessionsListResult](t, a, MethodSessionsList, nil)
	a.mu.Lock()
	q := append([]Notification(nil), a.queue...)
	a.mu.Unlock()
	for _, n := range q {
		if n.Method == NotifySessionAppended {
			t.Fatal("unfollowed client got ochat/sessionAppended")
		}
	}
}

func TestSessionsBadInput(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	outside := filepath.Join(e.ws, "notes.jsonl")
	os.WriteFile(outside, []byte("{}\n"), 0o644)
	tests := []struct {
		name   string
		method string
		params any
		code   jsonrpc2.Code
		want   string
	}{
		{"unknown id", MethodSessionsRead, SessionRefParams{SessionID: "11111111-2222-3333-4444-555555555555"}, CodeNotFound, "unknown native session"},
		{"unknown id open", MethodSessionsOpen, SessionRefParams{SessionID: "nope"}, CodeNotFound, "unknown native session"},
		{"not a session file", MethodSessionsRead, SessionRefParams{Path: outside}, jsonrpc2.InvalidParams, "cannot be read as a Claude, Codex"},
		{"not a session file open", MethodSessionsOpen, SessionRefParams{Path: "/etc/passwd"}, jsonrpc2.InvalidParams, "cannot be read as a Claude, Codex"},
		{"directory", MethodSessionsRead, SessionRefParams{Path: e.ws}, jsonrpc2.InvalidParams, "is a directory, not a session file"},
		{"directory follow", MethodSessionsFollow, SessionRefParams{Path: e.ws}, jsonrpc2.InvalidParams, "is a directory, not a session file"},
		{"missing file outside stores", MethodSessionsRead, SessionRefParams{Path: filepath.Join(e.ws, "gone.jsonl")}, CodeNotFound, "no native session"},
		{"relative path", MethodSessionsOpen, SessionRefParams{Path: "x.jsonl"}, jsonrpc2.InvalidParams, "absolute"},
		{"missing file in a store", MethodSessionsRead, SessionRefParams{Path: filepath.Join(filepath.Dir(nh.claudeFile), "gone.jsonl")}, CodeNotFound, "no native session"},
		{"neither", MethodSessionsOpen, map[string]any{}, jsonrpc2.InvalidParams, "sessionId"},
		{"both", MethodSessionsRead, SessionRefParams{SessionID: "a", Path: nh.claudeFile}, jsonrpc2.InvalidParams, "exclude"},
		{"path as id", MethodSessionsRead, SessionRefParams{SessionID: "a/b.jsonl"}, jsonrpc2.InvalidParams, "not a native session id"},
		{"wrong type", MethodSessionsRead, map[string]any{"sessionId": 3}, jsonrpc2.InvalidParams, "sessionId must be a string"},
		{"export unknown conversation", MethodExport, ExportParams{ConversationID: "01NOPE"}, CodeNotFound, "unknown conversation"},
		{"export bad format", MethodExport, ExportParams{ConversationID: "x", Format: "pdf"}, jsonrpc2.InvalidParams, "format"},
		{"export two refs", MethodExport, ExportParams{ConversationID: "x", SessionID: "y"}, jsonrpc2.InvalidParams, "exactly one"},
		{"import no events", MethodImport, ImportParams{}, jsonrpc2.InvalidParams, "events is required"},
		{"import object", MethodImport, map[string]any{"events": map[string]any{}}, jsonrpc2.InvalidParams, "events must be"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := callErr(t, c, tc.method, tc.params, tc.code)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("message %q lacks %q", msg, tc.want)
			}
		})
	}
	// the daemon is still fine
	call[SessionsListResult](t, c, MethodSessionsList, nil)
}

func TestSessionsReadAndExportImport(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	rd := call[SessionReadResult](t, c, MethodSessionsRead, SessionRefParams{Path: nh.codexFile})
	if rd.ID != fixtureCodexID || rd.Agent != "codex" || len(rd.Messages) == 0 || rd.Cwd != e.ws {
		t.Fatalf("read %+v", rd.Session)
	}
	for _, format := range []string{FormatEvents, FormatMarkdown, FormatJSON} {
		x := call[ExportConversationResult](t, c, MethodExport, ExportParams{SessionID: fixtureClaudeID, Format: format})
		if x.Format != format || x.Content == "" {
			t.Fatalf("%s export %+v", format, x)
		}
		if format == FormatEvents {
			if v := transcript.Validate([]byte(x.Content)); len(v) != 0 {
				t.Fatalf("exported log invalid: %v", v)
			}
			imp := call[ImportConversationResult](t, c, MethodImport, ImportParams{Events: mustJSON(x.Content), Title: "copy"})
			if imp.Conversation.Title != "copy" || len(imp.Skipped) != 0 {
				t.Fatalf("import %+v", imp)
			}
			got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: imp.ConversationID})
			src := call[SessionReadResult](t, c, MethodSessionsRead, SessionRefParams{SessionID: fixtureClaudeID})
			if len(got.Messages) != imp.Messages || countRole(got.Messages, transcript.RoleUser) != countRole(src.Messages, transcript.RoleUser) {
				t.Fatalf("imported %d messages (%d user), source %d user", len(got.Messages), countRole(got.Messages, transcript.RoleUser), countRole(src.Messages, transcript.RoleUser))
			}
			// and back out again: same log but for ids
			again := call[ExportConversationResult](t, c, MethodExport, ExportParams{ConversationID: imp.ConversationID})
			if again.Events != x.Events {
				t.Fatalf("re-export has %d events, first export %d", again.Events, x.Events)
			}
			// events as an array of objects
			var arr []json.RawMessage
			for _, l := range strings.Split(strings.TrimSpace(x.Content), "\n") {
				arr = append(arr, json.RawMessage(l))
			}
			imp2 := call[ImportConversationResult](t, c, MethodImport, map[string]any{"events": arr})
			if imp2.Messages != imp.Messages || imp2.Conversation.Title != src.Title {
				t.Fatalf("array import %+v (title %q)", imp2, src.Title)
			}
		}
		if format == FormatMarkdown && !strings.Contains(x.Content, "PONG from fake LLM") {
			t.Fatalf("markdown lacks the answer:\n%s", x.Content)
		}
	}
	// A broken log imports what it can and says what it skipped.
	imp := call[ImportConversationResult](t, c, MethodImport, ImportParams{Events: mustJSON(`{"seq":1,"type":"turn/start","turnId":"t"}
not json
{"seq":2,"type":"user/message","turnId":"t","messageId":"u","text":"hi"}
`)})
	if imp.Messages != 1 || len(imp.Skipped) != 1 || imp.Skipped[0].Line != 2 {
		t.Fatalf("broken import %+v", imp)
	}
}

func countRole(msgs []transcript.Message, r transcript.Role) int {
	n := 0
	for _, m := range msgs {
		if m.Role == r {
			n++
		}
	}
	return n
}

func mustJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// newSessionsRealEnv is a daemon whose agents "claude" and "test" are both
// the scripted testagent (sharing TESTAGENT_STATE, which holds a session
// with the Claude fixture's id so "claude" can session/load it).
func newSessionsRealEnv(t testing.TB) (*testEnv, *nativeHome, string) {
	t.Helper()
	bin := testagent(t)
	cfg := t.TempDir()
	state := t.TempDir()
	settings := map[string]any{"agent_servers": map[string]any{
		"claude": map[string]any{"command": bin, "env": map[string]string{"TESTAGENT_STATE": state}},
		"test":   map[string]any{"command": bin, "env": map[string]string{"TESTAGENT_STATE": t.TempDir()}},
	}}
	b, _ := json.Marshal(settings)
	os.MkdirAll(filepath.Join(cfg, "ochat"), 0o700)
	if err := os.WriteFile(filepath.Join(cfg, "ochat", "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	var nh *nativeHome
	e := newEnv(t, func(o *Options) {
		o.StartAgent = nil
		o.LoadRegistry = nil
		o.UserConfigDir = cfg
		nh = newNativeHome(t, o.Workspace)
		o.NativeEnv = &nh.env
		sessions := map[string]any{fixtureClaudeID: map[string]any{
			"id": fixtureClaudeID, "cwd": o.Workspace, "config": map[string]string{},
			"turns": []map[string]string{{"user": "PLAIN: say hello", "agent": "PONG from fake LLM"}},
		}}
		b, _ := json.Marshal(sessions)
		if err := os.WriteFile(filepath.Join(state, "sessions.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	return e, nh, state
}

func TestSessionsOpenContinue(t *testing.T) {
	e, nh, state := newSessionsRealEnv(t)
	c := e.dial("a")
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	rd := call[SessionReadResult](t, c, MethodSessionsRead, SessionRefParams{Path: nh.claudeFile})
	if !open.Created || open.Conversation.Native == nil || open.Conversation.Native.SessionID != fixtureClaudeID ||
		open.Conversation.Native.Agent != "claude" || open.Conversation.Native.Path != nh.claudeFile {
		t.Fatalf("open %+v", open.Conversation)
	}
	// The snapshot is the native messages with the interrupted turn of
	// the fixture ("SLOW: take your time", then Esc) as a cancelled answer.
	nat := nativeMessages(&rd.Transcript)
	if len(open.Messages) != len(nat) || len(nat) != len(rd.Messages)+1 || open.Conversation.Title != rd.Title {
		t.Fatalf("snapshot has %d messages, native %d (%d with the interruption)", len(open.Messages), len(rd.Messages), len(nat))
	}
	cancelled := 0
	for i := range open.Messages {
		if i > 0 && open.Messages[i].ID <= open.Messages[i-1].ID {
			t.Fatalf("snapshot ids not ascending at %d", i)
		}
		if open.Messages[i].Content != nat[i].Content || len(open.Messages[i].Segments) != len(nat[i].Segments) || open.Messages[i].Status != nat[i].Status && nat[i].Status != "" {
			t.Fatalf("snapshot message %d differs: %+v vs %+v", i, open.Messages[i], nat[i])
		}
		if m := open.Messages[i]; m.Status == transcript.StatusCancelled {
			if cancelled++; m.StopReason != "cancelled" || i == 0 || !strings.HasPrefix(open.Messages[i-1].Content, "SLOW") {
				t.Fatalf("cancelled message %d %+v does not answer the SLOW prompt", i, m)
			}
		}
	}
	if cancelled != 1 {
		t.Fatalf("snapshot has %d cancelled turns, want 1 (the interrupted SLOW prompt)", cancelled)
	}
	if rd.ConversationID != open.ConversationID {
		t.Fatalf("read conversationId %q, want %q", rd.ConversationID, open.ConversationID)
	}
	again := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{Path: nh.claudeFile})
	if again.Created || again.ConversationID != open.ConversationID {
		t.Fatalf("second open %+v", again)
	}
	list := call[SessionsListResult](t, c, MethodSessionsList, nil)
	if cl := findEntry(list.Sessions, SessionKindNative, fixtureClaudeID); cl == nil || cl.ConversationID != open.ConversationID {
		t.Fatalf("listing entry %+v", cl)
	}
	if findEntry(list.Sessions, SessionKindConversation, open.ConversationID) != nil {
		t.Fatal("opened conversation listed twice")
	}
	as, err := e.store.AgentSession(open.ConversationID, "claude")
	if err != nil || as.SessionID != fixtureClaudeID || as.Cursor != open.Messages[len(open.Messages)-1].ID {
		t.Fatalf("agent session %+v %v", as, err)
	}

	// Same agent: session/load of the native id, nothing handed off.
	res := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: open.ConversationID, Text: "ECHOALL"})
	log := collect(t, c, res.TurnID, nil)
	if log.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("load turn ended %+v", log.terminal())
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: open.ConversationID})
	last := got.Messages[len(got.Messages)-1]
	if last.Agent != "claude" || strings.TrimSpace(answerText(last)) != "ECHOALL" {
		t.Fatalf("load answer %q by %s (want the bare prompt: the loaded session has seen everything)", answerText(last), last.Agent)
	}
	var stateAfter map[string]struct {
		Turns []struct{ User string } `json:"turns"`
	}
	b, _ := os.ReadFile(filepath.Join(state, "sessions.json"))
	json.Unmarshal(b, &stateAfter)
	if n := len(stateAfter[fixtureClaudeID].Turns); n != 2 {
		t.Fatalf("native session %s has %d turns in the agent, want 2 (loaded, then prompted)", fixtureClaudeID, n)
	}
	if as, _ := e.store.AgentSession(open.ConversationID, "claude"); as.SessionID != fixtureClaudeID {
		t.Fatalf("claude session became %q", as.SessionID)
	}

	// Another agent: a new session receiving the whole transcript.
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: open.ConversationID, Agent: "test", Text: "ECHOALL"})
	log = collect(t, c, res.TurnID, nil)
	if log.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("handoff turn ended %+v", log.terminal())
	}
	got = call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: open.ConversationID})
	text := answerText(got.Messages[len(got.Messages)-1])
	for _, want := range []string{"PLAIN: say hello", "WRITE_FILE", "PONG from fake LLM", "PLAIN: after resume", "ECHOALL"} {
		if !strings.Contains(text, want) {
			t.Fatalf("handoff prompt lacks %q:\n%s", want, text)
		}
	}
	// The interrupted terminal turn is marked in the handoff too.
	if !regexp.MustCompile(`SLOW: take your time\n+\[claude\] \(cancelled\)`).MatchString(text) {
		t.Fatalf("handoff prompt does not mark the interrupted SLOW turn cancelled:\n%s", text)
	}
}

func answerText(m transcript.Message) string {
	var b strings.Builder
	for _, s := range m.Segments {
		if s.Type == transcript.SegContent {
			b.WriteString(s.Content)
		}
	}
	return b.String()
}

// Compile-time check that the history store satisfies what the listing
// cache needs.
var _ native.Cache = (*listing)(nil)
var _ = history.ErrNotFound

func TestSessionsStoreTraps(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	// a session path that is a directory: a warning, the rest still lists
	bogus := filepath.Join(filepath.Dir(nh.claudeFile), "11111111-0000-4000-8000-000000000000.jsonl")
	if err := os.Mkdir(bogus, 0o755); err != nil {
		t.Fatal(err)
	}
	res := call[SessionsListResult](t, c, MethodSessionsList, nil)
	warned := false
	for _, d := range res.Diagnostics {
		warned = warned || (d.Level == "warning" && d.Path == bogus)
	}
	if !warned || findEntry(res.Sessions, SessionKindNative, fixtureClaudeID) == nil {
		t.Fatalf("listing with a directory session: %+v %+v", res.Diagnostics, res.Sessions)
	}
	callErr(t, c, MethodSessionsRead, SessionRefParams{Path: bogus}, jsonrpc2.InvalidParams)

	// a followed session deleted: changed says removed, the follow ends,
	// the session no longer lists, the daemon stays up
	call[FollowResult](t, c, MethodSessionsFollow, SessionRefParams{Path: nh.claudeFile})
	if err := os.Remove(nh.claudeFile); err != nil {
		t.Fatal(err)
	}
	for {
		n := nextNote(t, c, NotifySessionsChanged)
		var p SessionsChangedParams
		json.Unmarshal(n.Params, &p)
		if len(p.Removed) == 1 && p.Removed[0] == nh.claudeFile {
			break
		}
	}
	e.srv.native.mu.Lock()
	following := len(e.srv.native.follows)
	e.srv.native.mu.Unlock()
	if following != 0 {
		t.Fatalf("%d follows after the file was deleted", following)
	}
	res = call[SessionsListResult](t, c, MethodSessionsList, nil)
	if findEntry(res.Sessions, SessionKindNative, fixtureClaudeID) != nil || findEntry(res.Sessions, SessionKindNative, fixtureCodexID) == nil {
		t.Fatalf("listing after deletion %+v", res.Sessions)
	}
	callErr(t, c, MethodSessionsFollow, SessionRefParams{Path: nh.claudeFile}, CodeNotFound)
}

func TestSessionsStartNativeWarmsCache(t *testing.T) {
	e, _ := newSessionsEnv(t)
	e.srv.StartNative()
	deadline := time.Now().Add(15 * time.Second)
	for e.srv.native.parsed.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("StartNative parsed %d files", e.srv.native.parsed.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := e.dial("a")
	res := call[SessionsListResult](t, c, MethodSessionsList, nil)
	if p := e.srv.native.parsed.Load(); p != 2 || len(res.Sessions) != 2 {
		t.Fatalf("first listing after StartNative: %d parsed in all, %d listed", p, len(res.Sessions))
	}
	if w, err := e.srv.watcher(); w == nil || err != nil {
		t.Fatalf("watcher not started: %v", err)
	}
}

// TestSessionsReadOutsideStores: a session file outside every store the
// daemon's environment names (another CLAUDE_CONFIG_DIR, a copy) reads and
// opens like one inside.
func TestSessionsReadOutsideStores(t *testing.T) {
	e, _ := newSessionsEnv(t)
	c := e.dial("a")
	elsewhere := filepath.Join(t.TempDir(), "other-config", "projects", "x", fixtureClaudeID+".jsonl")
	copyFixture(t, "testdata/native/claude/"+fixtureClaudeID+".jsonl", elsewhere, e.ws)
	res := call[SessionReadResult](t, c, MethodSessionsRead, SessionRefParams{Path: elsewhere})
	if res.Agent != "claude" || res.ID != fixtureClaudeID || len(res.Messages) == 0 {
		t.Fatalf("read %s: agent %q id %q, %d messages", elsewhere, res.Agent, res.ID, len(res.Messages))
	}
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{Path: elsewhere})
	if open.ConversationID == "" || len(open.Messages) == 0 {
		t.Fatalf("open %+v", open)
	}
}
