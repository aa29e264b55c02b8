package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/history/native"
	"github.com/ochat-dev/ochat/transcript"
)

// claudeLines writes Claude Code 2.1 session lines continuing a session:
// each line's parentUuid is the uuid of the line before, as the CLI writes
// them.
type claudeLines struct{ ws, parent string }

// newClaudeLines continues the session file path after its last line.
func newClaudeLines(t testing.TB, ws, path string) *claudeLines {
	t.Helper()
	return &claudeLines{ws: ws, parent: lastClaudeUUID(t, path)}
}

// lastClaudeUUID is the uuid of the last user or assistant line of path.
func lastClaudeUUID(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l struct{ Type, UUID string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && (l.Type == "user" || l.Type == "assistant") && l.UUID != "" {
			last = l.UUID
		}
	}
	if last == "" {
		t.Fatalf("%s has no user or assistant line", path)
	}
	return last
}

func (c *claudeLines) line(typ string, message map[string]any, parent string) (string, string) {
	claudeLineSeq++
	uuid := fmt.Sprintf("11111111-0000-4000-8000-%012d", claudeLineSeq)
	if parent == "" {
		parent = c.parent
	}
	c.parent = uuid
	b, _ := json.Marshal(map[string]any{
		"parentUuid": parent, "isSidechain": false, "type": typ, "userType": "external", "message": message,
		"uuid": uuid, "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"cwd": c.ws, "sessionId": fixtureClaudeID, "version": "2.1.83", "gitBranch": "main",
	})
	return string(b), uuid
}

// user is a prompt typed in the terminal.
func (c *claudeLines) user(text string) string {
	l, _ := c.line("user", map[string]any{"role": "user", "content": text}, "")
	return l
}

// userAfter is a prompt whose parent is the line with uuid parent (a
// rewind: the CLI continues from an earlier message).
func (c *claudeLines) userAfter(parent, text string) string {
	l, _ := c.line("user", map[string]any{"role": "user", "content": text}, parent)
	return l
}

// assistant is one content block of API message msgID.
func (c *claudeLines) assistant(msgID, text string) string {
	l, _ := c.line("assistant", map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
		"content": []map[string]any{{"type": "text", "text": text}}, "stop_reason": "end_turn",
	}, "")
	return l
}

// uuidOf is the uuid of a line claudeLines wrote.
func uuidOf(t testing.TB, line string) string {
	t.Helper()
	var l struct{ UUID string }
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.UUID == "" {
		t.Fatalf("no uuid in %s (%v)", line, err)
	}
	return l.UUID
}

// claudeLineSeq numbers the lines claudeLines writes (uuids stay unique
// across the tests of one process).
var claudeLineSeq int

// firstUserUUID is the uuid of the first user line of path.
func firstUserUUID(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ln := range strings.Split(string(b), "\n") {
		var l struct{ Type, UUID string }
		if json.Unmarshal([]byte(ln), &l) == nil && l.Type == "user" && l.UUID != "" {
			return l.UUID
		}
	}
	t.Fatalf("%s has no user line", path)
	return ""
}

func lastMessage(msgs []transcript.Message) transcript.Message {
	if len(msgs) == 0 {
		return transcript.Message{}
	}
	return msgs[len(msgs)-1]
}

func TestNativeSyncClaude(t *testing.T) {
	e, nh := newSessionsEnv(t)
	a, b := e.dial("a"), e.dial("b")
	open := call[OpenSessionResult](t, a, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	conv := open.ConversationID
	n0 := len(open.Messages)
	tr, err := native.ReadFile(ctxT(t), nh.claudeFile)
	if err != nil {
		t.Fatal(err)
	}
	nat := nativeMessages(tr)
	fi, _ := os.Stat(nh.claudeFile)
	if ref := open.Conversation.Native; ref == nil || ref.LastNativeID != lastMessage(nat).ID || ref.LastMessageID != lastMessage(open.Messages).ID ||
		ref.Count != len(nat) || ref.Size != fi.Size() || ref.ModTimeNs != fi.ModTime().UnixNano() || ref.MarkedAt == 0 ||
		len(ref.Links) != len(nat) || ref.Links[len(nat)-1] != (history.NativeLink{NativeID: lastMessage(nat).ID, MessageID: lastMessage(open.Messages).ID}) {
		t.Fatalf("mark after open %+v, want last native %s, %d messages, size %d", open.Conversation.Native, lastMessage(nat).ID, len(nat), fi.Size())
	}
	call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: conv})

	cl := newClaudeLines(t, e.ws, nh.claudeFile)
	rewindTo := firstUserUUID(t, nh.claudeFile)
	var grownLine string // the second line of msg_t2, rewound to later
	before, _ := os.ReadFile(nh.claudeFile)
	written := string(before)
	// Each step changes the native file (or not), then asks the daemon in
	// one way; the conversation must then hold want messages.
	lineT2 := func() string { grownLine = cl.assistant("msg_t2", "and more"); return grownLine }
	grownUUID := func() string { return uuidOf(t, grownLine) }
	steps := []struct {
		name    string
		lines   []string
		via     string // "get", "subscribe", "open", "history"
		want    int    // messages in the conversation after the step
		last    string // text of the last message ("" = not checked)
		updated bool   // open: the last imported message was replaced
		rewound int    // open: conversation messages the native session lost
		note    string // open: substring of the sync note
		resync  bool   // the other subscriber is sent ochat/resync
	}{
		{name: "terminal turn on get", lines: []string{cl.user("TERMINAL one"), cl.assistant("msg_t1", "answer one")}, via: "get", want: n0 + 2, last: "answer one", resync: true},
		{name: "get again, no duplicate", via: "get", want: n0 + 2},
		{name: "subscribe, no duplicate", via: "subscribe", want: n0 + 2},
		{name: "a non-message line only", lines: []string{`{"type":"last-prompt","lastPrompt":"TERMINAL one","sessionId":"` + fixtureClaudeID + `"}`}, via: "open", want: n0 + 2},
		{name: "open again imports", lines: []string{cl.user("TERMINAL two"), cl.assistant("msg_t2", "answer two")}, via: "open", want: n0 + 4, last: "answer two", resync: true},
		{name: "the turn grows in place", lines: []string{lineT2()}, via: "open", want: n0 + 4, last: "answer two\n\nand more", updated: true, resync: true},
		{name: "terminal turn on subscribe", lines: []string{cl.user("TERMINAL three"), cl.assistant("msg_t3", "answer three")}, via: "subscribe", want: n0 + 6, last: "answer three", resync: true},
		// Rewound to answer two: turn three stays, the new turn follows it.
		{name: "rewound in the terminal", lines: []string{cl.userAfter(grownUUID(), "TERMINAL rewound"), cl.assistant("msg_r1", "answer rewound")}, via: "open", want: n0 + 8, last: "answer rewound", rewound: 2, note: "no longer holds the conversation's last 2 message(s)", resync: true},
		{name: "still rewound", via: "get", want: n0 + 8, last: "answer rewound"},
		{name: "goes on after the rewind", lines: []string{cl.user("TERMINAL four"), cl.assistant("msg_t4", "answer four")}, via: "get", want: n0 + 10, last: "answer four", resync: true},
		// Rewound to before every message the conversation holds.
		{name: "rewound past everything", lines: []string{cl.userAfter(rewindTo, "TERMINAL restart")}, via: "open", want: n0 + 10, last: "answer four", note: "past every message of the conversation"},
		{name: "goes on from the new end", lines: []string{cl.assistant("msg_t5", "answer five")}, via: "open", want: n0 + 11, last: "answer five", resync: true},
	}
	have := n0
	for _, st := range steps {
		for _, l := range st.lines {
			appendLine(t, nh.claudeFile, l)
			written += l + "\n"
		}
		var msgs []transcript.Message
		switch st.via {
		case "get":
			res := call[GetConversationResult](t, a, MethodConversationsGet, ConversationParams{ConversationID: conv})
			quiet := st.want == have && !st.updated && st.rewound == 0 && st.note == ""
			if quiet != (res.Sync == nil) || res.Sync != nil && (res.Sync.Imported != st.want-have || res.Sync.Rewound != st.rewound || !strings.Contains(res.Sync.Note, st.note)) {
				t.Fatalf("%s: get's sync %+v", st.name, res.Sync)
			}
			msgs = res.Messages
		case "subscribe":
			msgs = call[SubscribeResult](t, a, MethodSubscribe, ConversationParams{ConversationID: conv}).Messages
		case "open":
			res := call[OpenSessionResult](t, a, MethodSessionsOpen, SessionRefParams{Path: nh.claudeFile})
			if res.Created || res.ConversationID != conv || res.Sync == nil {
				t.Fatalf("%s: open %+v", st.name, res)
			}
			if res.Sync.Imported != st.want-have || res.Sync.Updated != st.updated || res.Sync.Rewound != st.rewound || !strings.Contains(res.Sync.Note, st.note) || (st.note == "") != (res.Sync.Note == "") {
				t.Fatalf("%s: sync %+v, want updated %v note %q", st.name, res.Sync, st.updated, st.note)
			}
			msgs = res.Messages
		}
		if len(msgs) != st.want {
			t.Fatalf("%s: %d messages, want %d", st.name, len(msgs), st.want)
		}
		have = st.want
		for i := 1; i < len(msgs); i++ {
			if msgs[i].ID <= msgs[i-1].ID {
				t.Fatalf("%s: ids not ascending at %d", st.name, i)
			}
		}
		if last := lastMessage(msgs); st.last != "" && (answerText(last) != st.last || last.Agent != "claude" || last.Status != transcript.StatusCompleted) {
			t.Fatalf("%s: last message %q by %q (%s), want %q by claude", st.name, answerText(last), last.Agent, last.Status, st.last)
		}
		if st.resync {
			n := nextNote(t, b, NotifyResync)
			var p ResyncParams
			json.Unmarshal(n.Params, &p)
			if p.ConversationID != conv || !strings.Contains(p.Reason, "native session changed") {
				t.Fatalf("%s: resync %+v", st.name, p)
			}
			call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: conv})
		}
	}
	// Imported turns are ordinary messages: user text, then claude's answer.
	got := call[GetConversationResult](t, a, MethodConversationsGet, ConversationParams{ConversationID: conv})
	msgs := got.Messages
	if u := msgs[n0]; u.Role != transcript.RoleUser || u.Content != "TERMINAL one" {
		t.Fatalf("imported user message %+v", u)
	}
	// Turn three, rewound in the terminal, stayed before the new turn, and
	// the mark records the rewind.
	if msgs[n0+4].Content != "TERMINAL three" || msgs[n0+6].Content != "TERMINAL rewound" {
		t.Fatalf("after the rewind: %q then %q", msgs[n0+4].Content, msgs[n0+6].Content)
	}
	want := history.NativeRewind{Kept: msgs[n0+3].ID, First: msgs[n0+4].ID, Last: msgs[n0+5].ID, Count: 2}
	if rw := got.Conversation.Native.Rewinds; len(rw) != 1 || rw[0].At == 0 || (history.NativeRewind{Kept: rw[0].Kept, First: rw[0].First, Last: rw[0].Last, Count: rw[0].Count}) != want {
		t.Fatalf("rewinds %+v, want one %+v", rw, want)
	}
	// The native session holds the imported turns: claude's session cursor
	// moved past them (a session/load prompt hands nothing off again).
	if as, err := e.store.AgentSession(conv, "claude"); err != nil || as.Cursor != lastMessage(msgs).ID {
		t.Fatalf("claude cursor %q (%v), want %s", as.Cursor, err, lastMessage(msgs).ID)
	}
	// The native file was only read.
	if after, _ := os.ReadFile(nh.claudeFile); string(after) != written {
		t.Fatal("the native file holds something the test did not write")
	}
}

// A turn ochat runs in the native session itself (same agent, session/load)
// is written by the agent to the native file: the mark moves past it, so it
// is not imported again. A handoff turn of another agent carries the
// terminal's turns and leaves the mark alone.
func TestNativeSyncOchatTurns(t *testing.T) {
	e, nh, _ := newSessionsRealEnv(t)
	c := e.dial("a")
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	conv := open.ConversationID
	n0 := len(open.Messages)
	cl := newClaudeLines(t, e.ws, nh.claudeFile)

	// A terminal turn, then a prompt to claude: the sync before the send
	// imports the turn, and claude's cursor moves past it, so the loaded
	// session gets the bare prompt.
	appendLine(t, nh.claudeFile, cl.user("TERMINAL one"))
	appendLine(t, nh.claudeFile, cl.assistant("msg_t1", "answer one"))
	res := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Text: "ECHOALL"})
	if lg := collect(t, c, res.TurnID, nil); lg.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("load turn ended %+v", lg.terminal())
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if len(got.Messages) != n0+4 || got.Messages[n0].Content != "TERMINAL one" || strings.TrimSpace(answerText(lastMessage(got.Messages))) != "ECHOALL" {
		t.Fatalf("after the load turn: %d messages (want %d), last %q", len(got.Messages), n0+4, answerText(lastMessage(got.Messages)))
	}
	// The scripted agent keeps its sessions elsewhere: when the turn ended
	// the native file did not hold it, so the mark waits for the prompt.
	fi, _ := os.Stat(nh.claudeFile)
	if ref := got.Conversation.Native; ref.LastNativeID != "msg_t1" || ref.LastMessageID != "" || ref.Size != fi.Size() || ref.AwaitPrompt != "ECHOALL" {
		t.Fatalf("mark after the load turn %+v (want at msg_t1, awaiting ECHOALL)", ref)
	}
	// The agent writes its log late (simulated): the turn is skipped.
	appendLine(t, nh.claudeFile, cl.user("ECHOALL"))
	appendLine(t, nh.claudeFile, cl.assistant("msg_o1", "ECHOALL"))
	got = call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if ref := got.Conversation.Native; len(got.Messages) != n0+4 || ref.LastNativeID != "msg_o1" || ref.AwaitPrompt != "" {
		t.Fatalf("after the late log: %d messages (want %d), mark %+v", len(got.Messages), n0+4, ref)
	}

	// More turns ochat runs in the native session (simulated: lines as the
	// agent writes them, before or after the turn's end; then the sync).
	ochatTurns := []struct {
		name        string
		prompt      string
		before      []string // written before the turn ends
		after       []string // written after it
		mark, await string   // the mark when the turn ended
	}{
		{name: "written before the end", prompt: "PROMPT B", before: []string{cl.user("PROMPT B"), cl.assistant("msg_o2", "B")}, mark: "msg_o2"},
		{name: "answer written late", prompt: "PROMPT C", before: []string{cl.user("PROMPT C")}, after: []string{cl.assistant("msg_o3", "C")}, mark: "msg_o2", await: "PROMPT C"},
		{name: "all written late", prompt: "PROMPT D", after: []string{cl.user("PROMPT D"), cl.assistant("msg_o4", "D")}, mark: "msg_o3", await: "PROMPT D"},
		{name: "a handoff before the prompt", prompt: "PROMPT E", before: []string{cl.user("<handoff>\n[user]\nx\n</handoff>\n\nPROMPT E"), cl.assistant("msg_o5", "E")}, mark: "msg_o5"},
	}
	for _, tt := range ochatTurns {
		for _, l := range tt.before {
			appendLine(t, nh.claudeFile, l)
		}
		e.srv.nativeTurnEnded(conv, "claude", fixtureClaudeID, tt.prompt, true)
		if cv, _ := e.store.Conversation(conv); cv.Native.LastNativeID != tt.mark || cv.Native.AwaitPrompt != tt.await {
			t.Fatalf("%s: mark at the turn's end %+v, want %s awaiting %q", tt.name, cv.Native, tt.mark, tt.await)
		}
		for _, l := range tt.after {
			appendLine(t, nh.claudeFile, l)
		}
		for _, via := range []string{MethodConversationsGet, MethodSubscribe} {
			got = call[GetConversationResult](t, c, via, ConversationParams{ConversationID: conv})
			if len(got.Messages) != n0+4 {
				t.Fatalf("%s: %s: %d messages, want %d (ochat's own turn imported?)", tt.name, via, len(got.Messages), n0+4)
			}
		}
		if ref := got.Conversation.Native; ref.AwaitPrompt != "" || ref.LastNativeID == tt.mark && len(tt.after) > 0 {
			t.Fatalf("%s: mark after the sync %+v", tt.name, ref)
		}
	}
	// Another agent's turn (or claude in a session that is not the native
	// one) does not move the mark.
	e.srv.nativeTurnEnded(conv, "test", fixtureClaudeID, "x", true)
	e.srv.nativeTurnEnded(conv, "claude", "some-other-session", "x", true)
	if cv, _ := e.store.Conversation(conv); cv.Native.LastNativeID != "msg_o5" || cv.Native.MarkedAt != got.Conversation.Native.MarkedAt {
		t.Fatalf("mark moved by a turn outside the native session: %+v", cv.Native)
	}

	// A turn whose log the agent never writes: the terminal's next turn is
	// imported all the same, and the wait ends.
	e.srv.nativeTurnEnded(conv, "claude", fixtureClaudeID, "PROMPT F never logged", true)

	// A terminal turn, then a handoff to another agent: the prompt's
	// handoff block carries it; the mark stays where the import left it.
	appendLine(t, nh.claudeFile, cl.user("TERMINAL two"))
	appendLine(t, nh.claudeFile, cl.assistant("msg_t2", "answer two"))
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "test", Text: "ECHOALL"})
	if lg := collect(t, c, res.TurnID, nil); lg.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("handoff turn ended %+v", lg.terminal())
	}
	got = call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	text := answerText(lastMessage(got.Messages))
	for _, want := range []string{"TERMINAL one", "TERMINAL two", "answer two", "ECHOALL"} {
		if !strings.Contains(text, want) {
			t.Fatalf("handoff prompt lacks %q:\n%s", want, text)
		}
	}
	if len(got.Messages) != n0+8 {
		t.Fatalf("after the handoff: %d messages, want %d", len(got.Messages), n0+8)
	}
	if ref := got.Conversation.Native; ref.LastNativeID != "msg_t2" || ref.AwaitPrompt != "" {
		t.Fatalf("mark after the handoff %+v, want at msg_t2", ref)
	}

	// The terminal rewinds to the end of ochat's turn E (its link): the
	// turns after it stay, marked rewound; the new turn follows them, and
	// ochat's own turns still in the native file are not imported again.
	appendLine(t, nh.claudeFile, cl.userAfter(lastClaudeUUIDOf(t, nh.claudeFile, "msg_o5"), "TERMINAL after rewind"))
	appendLine(t, nh.claudeFile, cl.assistant("msg_t3", "answer after rewind"))
	got = call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if sy := got.Sync; sy == nil || sy.Imported != 2 || sy.Rewound != 4 || !strings.Contains(sy.Note, "last 4 message(s)") {
		t.Fatalf("sync after rewinding to ochat's turn: %+v", got.Sync)
	}
	if len(got.Messages) != n0+10 || got.Messages[n0+8].Content != "TERMINAL after rewind" || answerText(lastMessage(got.Messages)) != "answer after rewind" {
		t.Fatalf("after rewinding to ochat's turn: %d messages (want %d)", len(got.Messages), n0+10)
	}
	if rw := got.Conversation.Native.Rewinds; len(rw) != 1 || rw[0].First != got.Messages[n0+4].ID || rw[0].Last != got.Messages[n0+7].ID {
		t.Fatalf("rewinds %+v", rw)
	}
}

// lastClaudeUUIDOf is the uuid of the last line of path that is part of
// API message msgID.
func lastClaudeUUIDOf(t testing.TB, path, msgID string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, ln := range strings.Split(string(b), "\n") {
		var l struct {
			UUID    string
			Message struct{ ID string }
		}
		if json.Unmarshal([]byte(ln), &l) == nil && l.Message.ID == msgID {
			last = l.UUID
		}
	}
	if last == "" {
		t.Fatalf("%s has no line of %s", path, msgID)
	}
	return last
}

// nativeMessages folds interruption and error markers into turn statuses.
func TestNativeMessagesMarkers(t *testing.T) {
	user := func(id string) transcript.Message {
		return transcript.Message{ID: id, Role: transcript.RoleUser, Content: "prompt " + id}
	}
	answer := func(id string, st transcript.MessageStatus) transcript.Message {
		return transcript.Message{ID: id, Role: transcript.RoleAssistant, Status: st, Segments: []transcript.Segment{{Type: transcript.SegContent, Content: "x"}}}
	}
	mk := func(after, kind string) native.Marker {
		return native.Marker{AfterID: after, Kind: kind, Text: kind + " text", Timestamp: 7}
	}
	tests := []struct {
		name    string
		msgs    []transcript.Message
		markers []native.Marker
		want    string // id:status[:stopReason][!error] per message
	}{
		{name: "no markers", msgs: []transcript.Message{user("u1"), answer("a1", transcript.StatusCompleted)}, want: "u1: a1:completed"},
		{name: "interrupted answer", msgs: []transcript.Message{user("u1"), answer("a1", transcript.StatusCancelled), user("u2")},
			markers: []native.Marker{mk("a1", "interrupted")}, want: "u1: a1:cancelled:cancelled u2:"},
		{name: "interrupted before any answer, at the end", msgs: []transcript.Message{user("u1")},
			markers: []native.Marker{mk("u1", "interrupted")}, want: "u1: u1#interrupted:cancelled:cancelled"},
		{name: "interrupted before any answer, then a prompt", msgs: []transcript.Message{user("u1"), user("u2"), answer("a2", "")},
			markers: []native.Marker{mk("u1", "interrupted")}, want: "u1: u1#interrupted:cancelled:cancelled u2: a2:"},
		{name: "an error ends an unanswered turn", msgs: []transcript.Message{user("u1"), user("u2")},
			markers: []native.Marker{mk("u1", "error")}, want: "u1: u1#error:failed!error text u2:"},
		{name: "an error then an answer was a retry", msgs: []transcript.Message{user("u1"), answer("a1", transcript.StatusCompleted)},
			markers: []native.Marker{mk("u1", "error")}, want: "u1: a1:completed"},
		{name: "an error at the end may still be retried", msgs: []transcript.Message{user("u1")},
			markers: []native.Marker{mk("u1", "error")}, want: "u1:"},
		{name: "a failed answer stays failed", msgs: []transcript.Message{user("u1"), answer("a1", transcript.StatusFailed)},
			markers: []native.Marker{mk("a1", "interrupted")}, want: "u1: a1:failed"},
		{name: "compaction, notice and rollback are left out", msgs: []transcript.Message{user("u1"), answer("a1", transcript.StatusCompleted)},
			markers: []native.Marker{mk("", "compaction"), mk("u1", "notice"), mk("a1", "rollback")}, want: "u1: a1:completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &native.Transcript{Session: native.Session{Agent: "claude"}, Messages: tt.msgs, Markers: tt.markers}
			var got []string
			for _, m := range nativeMessages(tr) {
				g := m.ID + ":" + string(m.Status)
				if m.StopReason != "" {
					g += ":" + m.StopReason
				}
				if m.Error != "" {
					g += "!" + m.Error
				}
				if m.Role == transcript.RoleAssistant && (m.Agent != "claude" && strings.Contains(m.ID, "#") || m.Segments == nil) {
					t.Fatalf("added message %+v lacks its agent or segments", m)
				}
				got = append(got, g)
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Fatalf("got  %s\nwant %s", g, tt.want)
			}
		})
	}
}

// A terminal turn interrupted before it answered is imported as a
// cancelled answer, and the interruption that comes after a turn that was
// already imported makes it cancelled in place.
func TestNativeSyncInterrupted(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	conv, n0 := open.ConversationID, len(open.Messages)
	cl := newClaudeLines(t, e.ws, nh.claudeFile)
	steps := []struct {
		name   string
		lines  []string
		want   int      // messages
		status []string // statuses of the messages after the snapshot
	}{
		{name: "a prompt", lines: []string{cl.user("SLOW: wait")}, want: n0 + 1, status: []string{""}},
		{name: "interrupted before any answer", lines: []string{cl.user("[Request interrupted by user]")}, want: n0 + 2, status: []string{"", "cancelled"}},
		{name: "a prompt and part of an answer", lines: []string{cl.user("SLOW: again"), cl.assistant("msg_i1", "partial")}, want: n0 + 4, status: []string{"", "cancelled", "", "completed"}},
		{name: "interrupted mid-answer", lines: []string{cl.user("[Request interrupted by user]")}, want: n0 + 4, status: []string{"", "cancelled", "", "cancelled"}},
	}
	for _, st := range steps {
		for _, l := range st.lines {
			appendLine(t, nh.claudeFile, l)
		}
		got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
		if len(got.Messages) != st.want {
			t.Fatalf("%s: %d messages, want %d", st.name, len(got.Messages), st.want)
		}
		for i, want := range st.status {
			if m := got.Messages[n0+i]; string(m.Status) != want {
				t.Fatalf("%s: message %d (%s %q) is %q, want %q", st.name, i, m.Role, m.Content, m.Status, want)
			}
		}
	}
	// The handoff block another agent gets marks both turns.
	msgs, err := e.store.Messages(conv)
	if err != nil {
		t.Fatal(err)
	}
	h := transcript.RenderHandoff(msgs[n0:], transcript.HandoffOptions{})
	if !regexp.MustCompile(`(?s)SLOW: wait\n+\[claude\] \(cancelled\).*SLOW: again\n+\[claude\] \(cancelled\)\npartial`).MatchString(h) {
		t.Fatalf("handoff does not mark the interrupted turns:\n%s", h)
	}
}

// Codex rollouts: messages are numbered by line ("L<n>"), so appended
// lines keep the ids of the earlier ones.
func TestNativeSyncCodex(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{Path: nh.codexFile})
	n0 := len(open.Messages)
	if open.Conversation.Native.LastNativeID == "" {
		t.Fatalf("codex mark %+v", open.Conversation.Native)
	}
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	for _, l := range []string{
		`{"timestamp":"` + ts + `","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"TERMINAL codex"}]}}`,
		`{"timestamp":"` + ts + `","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"codex answer"}]}}`,
	} {
		appendLine(t, nh.codexFile, l)
	}
	for i, via := range []string{MethodConversationsGet, MethodConversationsGet} {
		got := call[GetConversationResult](t, c, via, ConversationParams{ConversationID: open.ConversationID})
		if len(got.Messages) != n0+2 || got.Messages[n0].Content != "TERMINAL codex" || answerText(got.Messages[n0+1]) != "codex answer" || got.Messages[n0+1].Agent != "codex" {
			t.Fatalf("get %d: %d messages (want %d), last %+v", i, len(got.Messages), n0+2, lastMessage(got.Messages))
		}
	}
	// `/undo` in the terminal rolls the last turn back: it stays in the
	// conversation, and the turn typed next follows it.
	for _, l := range []string{
		`{"timestamp":"` + ts + `","type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}`,
		`{"timestamp":"` + ts + `","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"TERMINAL after undo"}]}}`,
	} {
		appendLine(t, nh.codexFile, l)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: open.ConversationID})
	if sy := got.Sync; sy == nil || sy.Imported != 1 || sy.Rewound != 2 || len(got.Messages) != n0+3 || lastMessage(got.Messages).Content != "TERMINAL after undo" {
		t.Fatalf("after a rollback: sync %+v, %d messages (want %d)", got.Sync, len(got.Messages), n0+3)
	}

	// Codex compresses a finished rollout: the session is found again by
	// id, and what it gained meanwhile is imported.
	raw, err := os.ReadFile(nh.codexFile)
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw, []byte(`{"timestamp":"`+ts+`","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"TERMINAL after zst"}]}}`+"\n")...)
	enc, _ := zstd.NewWriter(nil)
	if err := os.WriteFile(nh.codexFile+".zst", enc.EncodeAll(raw, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(nh.codexFile); err != nil {
		t.Fatal(err)
	}
	got = call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: open.ConversationID})
	if len(got.Messages) != n0+4 || lastMessage(got.Messages).Content != "TERMINAL after zst" || got.Conversation.Native.Path != nh.codexFile+".zst" {
		t.Fatalf("after compression: %d messages (want %d), native %+v", len(got.Messages), n0+4, got.Conversation.Native)
	}
}

// A conversation opened before marks existed: nothing is guessed; the mark
// is set at the session's end, and later turns are imported.
func TestNativeSyncUnmarked(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	conv, n0 := open.ConversationID, len(open.Messages)
	old := open.Conversation.Native
	if err := e.store.SetNative(conv, &history.NativeRef{Agent: old.Agent, SessionID: old.SessionID, Path: old.Path}); err != nil {
		t.Fatal(err)
	}
	cl := newClaudeLines(t, e.ws, nh.claudeFile)
	appendLine(t, nh.claudeFile, cl.user("TERMINAL before the mark"))
	appendLine(t, nh.claudeFile, cl.assistant("msg_u1", "unmarked answer"))
	res := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	if res.Sync == nil || res.Sync.Imported != 0 || !strings.Contains(res.Sync.Note, "opened before") || len(res.Messages) != n0 {
		t.Fatalf("first sync of an unmarked conversation: %+v, %d messages (want %d)", res.Sync, len(res.Messages), n0)
	}
	if ref := res.Conversation.Native; ref.LastNativeID != "msg_u1" || ref.MarkedAt == 0 {
		t.Fatalf("mark %+v, want at msg_u1", ref)
	}
	appendLine(t, nh.claudeFile, cl.user("TERMINAL after the mark"))
	appendLine(t, nh.claudeFile, cl.assistant("msg_u2", "marked answer"))
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if len(got.Messages) != n0+2 || answerText(lastMessage(got.Messages)) != "marked answer" {
		t.Fatalf("%d messages (want %d), last %q", len(got.Messages), n0+2, answerText(lastMessage(got.Messages)))
	}
}

// A subscribed linked conversation grows as the terminal writes: the
// watcher's change syncs it and its subscribers are sent ochat/resync.
func TestNativeSyncLive(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c, b := e.dial("a"), e.dial("b")
	call[SessionsListResult](t, c, MethodSessionsList, nil) // starts the watcher
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	n0 := len(open.Messages)
	call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: open.ConversationID})
	cl := newClaudeLines(t, e.ws, nh.claudeFile)
	appendLine(t, nh.claudeFile, cl.user("TERMINAL live"))
	appendLine(t, nh.claudeFile, cl.assistant("msg_l1", "live answer"))
	for {
		n := nextNote(t, b, NotifyResync)
		var p ResyncParams
		json.Unmarshal(n.Params, &p)
		if p.ConversationID != open.ConversationID {
			t.Fatalf("resync %+v", p)
		}
		sub := call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: open.ConversationID})
		if len(sub.Messages) == n0+2 && answerText(lastMessage(sub.Messages)) == "live answer" {
			break // the two lines may arrive in one sync or two
		}
		if len(sub.Messages) > n0+2 {
			t.Fatalf("%d messages, want %d", len(sub.Messages), n0+2)
		}
	}
	if cv, _ := e.store.Conversation(open.ConversationID); cv.Native.LastNativeID != "msg_l1" {
		t.Fatalf("mark %+v", cv.Native)
	}
}

// BenchmarkNativeSync: the cost a linked conversation adds to get,
// subscribe and send when its native file did not change (a stat), and
// when one terminal turn is to be imported (read, import, mark).
func BenchmarkNativeSync(b *testing.B) {
	e, nh := newSessionsEnv(b)
	c := e.dial("a")
	open := call[OpenSessionResult](b, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	ctx := ctxT(b)
	b.Run("unchanged", func(b *testing.B) {
		for b.Loop() {
			if res, err := e.srv.syncNative(ctx, open.ConversationID, nil); err != nil || res.Imported != 0 {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("one-turn", func(b *testing.B) {
		cl := newClaudeLines(b, e.ws, nh.claudeFile)
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			appendLine(b, nh.claudeFile, cl.user(fmt.Sprintf("TERMINAL %d", i)))
			appendLine(b, nh.claudeFile, cl.assistant(fmt.Sprintf("msg_b%d", i), "answer"))
			b.StartTimer()
			if res, err := e.srv.syncNative(ctx, open.ConversationID, nil); err != nil || res.Imported != 2 {
				b.Fatal(res, err)
			}
		}
	})
}

// No sync while a turn runs in the conversation: the terminal's turn is
// imported once the turn has ended.
func TestNativeSyncWhileRunning(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	conv, n0 := open.ConversationID, len(open.Messages)
	res := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "fake", Text: "HOLD 1"})
	cl := newClaudeLines(t, e.ws, nh.claudeFile)
	appendLine(t, nh.claudeFile, cl.user("TERMINAL during the turn"))
	appendLine(t, nh.claudeFile, cl.assistant("msg_r1", "answer during the turn"))
	again := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	if again.Sync == nil || again.Sync.Imported != 0 || !strings.Contains(again.Sync.Note, "a turn is running") || len(again.Messages) != n0+2 {
		t.Fatalf("open during a turn: %+v, %d messages (want %d)", again.Sync, len(again.Messages), n0+2)
	}
	if got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv}); len(got.Messages) != n0+2 {
		t.Fatalf("get during a turn: %d messages, want %d", len(got.Messages), n0+2)
	}
	call[CancelResult](t, c, MethodChatCancel, ConversationParams{ConversationID: conv})
	if lg := collect(t, c, res.TurnID, nil); lg.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("turn ended %+v", lg.terminal())
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	if len(got.Messages) != n0+4 || got.Messages[n0+2].Content != "TERMINAL during the turn" || got.Conversation.Native.LastNativeID != "msg_r1" {
		t.Fatalf("after the turn: %d messages (want %d), mark %+v", len(got.Messages), n0+4, got.Conversation.Native)
	}
}

// An agent that logs ochat's turn after the turn ended, prompt first and
// its answer later: a sync that runs in between (the watcher's) keeps
// waiting for the answer, so it is not imported when it lands.
func TestNativeSyncLateAnswer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before bool // the prompt was logged before the turn ended
	}{
		{name: "prompt logged before the end", before: true},
		{name: "prompt logged after the end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, nh := newSessionsEnv(t)
			c := e.dial("a")
			open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
			conv, n0 := open.ConversationID, len(open.Messages)
			cl := newClaudeLines(t, e.ws, nh.claudeFile)
			prompt := cl.user("PROMPT late")
			if tt.before {
				appendLine(t, nh.claudeFile, prompt)
			}
			e.srv.nativeTurnEnded(conv, "claude", fixtureClaudeID, "PROMPT late", true)
			if !tt.before {
				appendLine(t, nh.claudeFile, prompt)
			}
			// A line that is no message changes the file: the first sync reads it.
			other := `{"type":"last-prompt","lastPrompt":"PROMPT late","sessionId":"` + fixtureClaudeID + `"}`
			for i, line := range []string{other, cl.assistant("msg_late", "late answer")} {
				appendLine(t, nh.claudeFile, line)
				got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
				if len(got.Messages) != n0 || got.Sync != nil && got.Sync.Imported != 0 {
					t.Fatalf("sync %d: %d messages (want %d), sync %+v: ochat's own turn imported", i, len(got.Messages), n0, got.Sync)
				}
				if ref := got.Conversation.Native; i == 0 && ref.AwaitPrompt != "PROMPT late" || i == 1 && (ref.AwaitPrompt != "" || ref.LastNativeID != "msg_late") {
					t.Fatalf("sync %d: mark %+v", i, ref)
				}
			}
			// The terminal's next turn is imported.
			appendLine(t, nh.claudeFile, cl.user("TERMINAL next"))
			appendLine(t, nh.claudeFile, cl.assistant("msg_next", "next answer"))
			got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
			if len(got.Messages) != n0+2 || got.Messages[n0].Content != "TERMINAL next" {
				t.Fatalf("after the terminal's turn: %d messages, want %d", len(got.Messages), n0+2)
			}
		})
	}
}

// The awaited prompt of a turn ochat ran is matched exactly, only as the
// next prompt, and only when the agent took the prompt: a terminal turn
// is never skipped for it.
func TestNativeSyncAwaitPrompt(t *testing.T) {
	tests := []struct {
		name     string
		prompt   string
		accepted bool     // the turn ended with a stop reason
		lines    []string // user text / "A:" answer text, written after the turn ended
		await    string   // AwaitPrompt when the turn ended
		imported int
	}{
		{name: "a failed turn never logged", prompt: "fix it", lines: []string{"fix it", "A:fixed"}, imported: 2},
		{name: "a terminal prompt holding the awaited text", prompt: "x", accepted: true, await: "x", lines: []string{"please x too", "A:done"}, imported: 2},
		{name: "a terminal prompt before the awaited one", prompt: "again", accepted: true, await: "again", lines: []string{"TERMINAL a", "A:a", "again", "A:b"}, imported: 4},
		{name: "ochat's prompt after a handoff block", prompt: "PROMPT H", accepted: true, await: "PROMPT H",
			lines: []string{"<handoff>\nThe conversation went on without you.\n[user]\nx\n</handoff>\n\nPROMPT H\n", "A:h"}},
		{name: "a handoff block holding its close tag", prompt: "PROMPT H", accepted: true, await: "PROMPT H",
			lines: []string{"<handoff>\n[user]\nsay </handoff>\n</handoff>\nPROMPT H", "A:h"}},
		{name: "a failed turn the agent logged", prompt: "PROMPT F", lines: []string{"PROMPT F", "A:partial", "TERMINAL after", "A:t"}, imported: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, nh := newSessionsEnv(t)
			c := e.dial("a")
			open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
			conv, n0 := open.ConversationID, len(open.Messages)
			e.srv.nativeTurnEnded(conv, "claude", fixtureClaudeID, tt.prompt, tt.accepted)
			if cv, _ := e.store.Conversation(conv); cv.Native.AwaitPrompt != tt.await {
				t.Fatalf("awaiting %q, want %q", cv.Native.AwaitPrompt, tt.await)
			}
			cl := newClaudeLines(t, e.ws, nh.claudeFile)
			for i, l := range tt.lines {
				if a, ok := strings.CutPrefix(l, "A:"); ok {
					appendLine(t, nh.claudeFile, cl.assistant(fmt.Sprintf("msg_aw%d", i), a))
				} else {
					appendLine(t, nh.claudeFile, cl.user(l))
				}
			}
			got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
			if len(got.Messages) != n0+tt.imported || got.Conversation.Native.AwaitPrompt != "" {
				t.Fatalf("%d message(s) imported, want %d; mark %+v", len(got.Messages)-n0, tt.imported, got.Conversation.Native)
			}
		})
	}
}

func TestPromptIs(t *testing.T) {
	tests := []struct {
		content, prompt string
		want            bool
	}{
		{"hello", "hello", true},
		{"  hello\n", "hello ", true},
		{"hello there", "hello", false},
		{"say hello", "hello", false},
		{"<handoff>\n[user]\nx\n</handoff>\n\nhello", "hello", true},
		{"<handoff>\n[user]\nx\n</handoff>\nhello world", "hello", false},
		{"<handoff>\n[user]\n</handoff>\n</handoff>\nhello", "hello", true},
		{"x <handoff>\n</handoff>\nhello", "hello", false},
		{"<handoff>\nno end hello", "hello", false},
	}
	for _, tt := range tests {
		if got := promptIs(tt.content, tt.prompt); got != tt.want {
			t.Errorf("promptIs(%q, %q) = %v, want %v", tt.content, tt.prompt, got, tt.want)
		}
	}
}

// A sync of a linked conversation and a prompt to it never both proceed:
// a prompt waits for a sync under way (and is refused when it lasts too
// long), and a sync does not start while a turn runs.
func TestNativeSyncHoldsTurns(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	conv, n0 := open.ConversationID, len(open.Messages)
	ctx := ctxT(t)

	// A prompt while a sync holds the conversation: refused once the wait
	// runs out, nothing stored.
	done, err := e.srv.beginSync(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.mu.Lock()
	e.srv.native.syncWait = time.Millisecond
	e.srv.mu.Unlock()
	if msg := callErr(t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "fake", Text: "PLAIN"}, CodeConflict); !strings.Contains(msg, "being synced") {
		t.Fatalf("send during a sync: %s", msg)
	}
	if msgs, _ := e.store.Messages(conv); len(msgs) != n0 {
		t.Fatalf("send during a sync stored %d message(s)", len(msgs)-n0)
	}
	// One that waits long enough goes on when the sync ends.
	e.srv.mu.Lock()
	e.srv.native.syncWait = 0
	e.srv.mu.Unlock()
	sent := make(chan SendResult, 1)
	go func() {
		var r SendResult
		if err := c.Call(ctx, MethodChatSend, SendParams{ConversationID: conv, Agent: "fake", Text: "PLAIN"}, &r); err != nil {
			t.Errorf("send after a sync: %v", err)
		}
		sent <- r
	}()
	done()
	if lg := collect(t, c, (<-sent).TurnID, nil); lg.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("turn after a sync ended %+v", lg.terminal())
	}

	// Syncs and prompts racing: every terminal turn is imported once, and
	// every ochat turn keeps its prompt and answer together.
	cl := newClaudeLines(t, e.ws, nh.claudeFile)
	const rounds = 8
	for i := range rounds {
		appendLine(t, nh.claudeFile, cl.user(fmt.Sprintf("TERMINAL race %d", i)))
		appendLine(t, nh.claudeFile, cl.assistant(fmt.Sprintf("msg_race%d", i), "race answer"))
		synced := make(chan error, 1)
		go func() {
			_, err := e.srv.syncNative(ctx, conv, nil)
			synced <- err
		}()
		res := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "fake", Text: "PLAIN"})
		if lg := collect(t, c, res.TurnID, nil); lg.terminal().Type != transcript.EvTurnCompleted {
			t.Fatalf("round %d: turn ended %+v", i, lg.terminal())
		}
		if err := <-synced; err != nil {
			t.Fatalf("round %d: sync: %v", i, err)
		}
	}
	msgs := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv}).Messages
	if want := n0 + 2 + rounds*4; len(msgs) != want {
		t.Fatalf("%d messages, want %d", len(msgs), want)
	}
	seen := map[string]int{}
	for i, m := range msgs[n0:] {
		if i > 0 && m.ID <= msgs[n0+i-1].ID {
			t.Fatalf("ids not ascending at %d", n0+i)
		}
		if m.Role == transcript.RoleUser {
			seen[m.Content]++
			if j := n0 + i + 1; j >= len(msgs) || msgs[j].Role != transcript.RoleAssistant {
				t.Fatalf("prompt %q is not followed by its answer", m.Content)
			}
		}
	}
	for i := range rounds {
		if n := seen[fmt.Sprintf("TERMINAL race %d", i)]; n != 1 {
			t.Fatalf("terminal turn %d imported %d times", i, n)
		}
	}
}

// A sync waits for nothing but its own conversation: while one linked
// conversation's native read is stuck (its session file is a FIFO no one
// writes), another linked conversation syncs.
func TestNativeSyncPerConversation(t *testing.T) {
	e, nh := newSessionsEnv(t)
	c := e.dial("a")
	open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	ctx := ctxT(t)

	fifo := filepath.Join(t.TempDir(), "stuck.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	now := time.Now().UnixMilli()
	stuck := history.Conversation{ID: e.srv.newID(), Title: "stuck", Agents: []string{}, CreatedAt: now, UpdatedAt: now}
	if err := e.store.CreateConversation(stuck); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetNative(stuck.ID, &history.NativeRef{Agent: "claude", SessionID: "stuck", Path: fifo, MarkedAt: now}); err != nil {
		t.Fatal(err)
	}
	stuckDone := make(chan struct{})
	go func() {
		defer close(stuckDone)
		e.srv.syncNative(ctx, stuck.ID, nil) // fails once the FIFO ends: it holds no session
	}()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // returns once the stuck sync opened it to read
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Close(); <-stuckDone }()

	cl := newClaudeLines(t, e.ws, nh.claudeFile)
	appendLine(t, nh.claudeFile, cl.user("TERMINAL beside a stuck sync"))
	appendLine(t, nh.claudeFile, cl.assistant("msg_pc1", "answer"))
	synced := make(chan NativeSync, 1)
	go func() {
		res, err := e.srv.syncNative(ctx, open.ConversationID, nil)
		if err != nil {
			t.Errorf("sync: %v", err)
		}
		synced <- res
	}()
	select {
	case res := <-synced:
		if res.Imported != 2 {
			t.Fatalf("sync beside a stuck one: %+v, want 2 imported", res)
		}
	case <-ctx.Done():
		t.Fatal("the sync of one conversation waited for another's")
	}
}

// A linked Claude session whose file is gone is searched for in the store
// once: later syncs give the same note without searching again, until the
// watcher reports a change in Claude's store or the session is opened
// again; then it is found where it moved and its new turns are imported.
func TestNativeSyncGone(t *testing.T) {
	for _, via := range []string{"watcher", "open"} {
		t.Run(via, func(t *testing.T) {
			e, nh := newSessionsEnv(t)
			c := e.dial("a")
			open := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
			conv, n0 := open.ConversationID, len(open.Messages)
			cl := newClaudeLines(t, e.ws, nh.claudeFile)
			appendLine(t, nh.claudeFile, cl.user("TERMINAL before the move"))
			appendLine(t, nh.claudeFile, cl.assistant("msg_g1", "moved answer"))
			away := filepath.Join(t.TempDir(), filepath.Base(nh.claudeFile))
			if err := os.Rename(nh.claudeFile, away); err != nil {
				t.Fatal(err)
			}
			get := func() GetConversationResult {
				return call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
			}
			got := get()
			if got.Sync == nil || !strings.Contains(got.Sync.Note, "gone from") || len(got.Messages) != n0 {
				t.Fatalf("sync of a gone session: %+v, %d messages (want %d)", got.Sync, len(got.Messages), n0)
			}
			note := got.Sync.Note
			// Back in the store under another project: not searched for
			// until something says the store changed.
			moved := filepath.Join(filepath.Dir(filepath.Dir(nh.claudeFile)), "-tmp-elsewhere", filepath.Base(nh.claudeFile))
			if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(away, moved); err != nil {
				t.Fatal(err)
			}
			if got = get(); got.Sync == nil || got.Sync.Note != note || len(got.Messages) != n0 {
				t.Fatalf("second sync of a gone session: %+v, %d messages (want the same note, %d)", got.Sync, len(got.Messages), n0)
			}
			switch via {
			case "watcher":
				e.srv.nativeFileChanged("codex", "/elsewhere/rollout.jsonl") // another store: still gone
				if got = get(); got.Sync == nil || got.Sync.Note != note {
					t.Fatalf("sync after another store's change: %+v", got.Sync)
				}
				e.srv.nativeFileChanged("claude", moved)
				got = get()
			case "open":
				res := call[OpenSessionResult](t, c, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
				if res.Sync == nil || res.Sync.Imported != 2 {
					t.Fatalf("open again: sync %+v", res.Sync)
				}
				got = get()
			}
			if len(got.Messages) != n0+2 || lastMessage(got.Messages).Agent != "claude" || got.Conversation.Native.Path != moved {
				t.Fatalf("after the store changed: %d messages (want %d), native %+v", len(got.Messages), n0+2, got.Conversation.Native)
			}
		})
	}
}

// TestNativeSyncFollowsFork: `claude --resume` (or --fork-session) going on
// in a new file under a new id — the history copied with the old
// sessionId, then the new turns — moves the link of the conversation opened
// from the old session to the new file: its subscribers see the new turns,
// the copied history is not imported again, and the listing shows the fork
// with its parent.
func TestNativeSyncFollowsFork(t *testing.T) {
	e, nh := newSessionsEnv(t)
	a, b := e.dial("a"), e.dial("b")
	call[SessionsListResult](t, a, MethodSessionsList, nil) // starts the watcher
	open := call[OpenSessionResult](t, a, MethodSessionsOpen, SessionRefParams{SessionID: fixtureClaudeID})
	conv, n0 := open.ConversationID, len(open.Messages)
	call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: conv})

	const forkID = "5e5e5e5e-0000-4000-8000-00000000f0f0"
	copied, err := os.ReadFile(nh.claudeFile)
	if err != nil {
		t.Fatal(err)
	}
	cl := newClaudeLines(t, e.ws, nh.claudeFile)
	fresh := cl.user("TERMINAL in the fork") + "\n" + cl.assistant("msg_fork1", "answer in the fork") + "\n"
	forkPath := filepath.Join(filepath.Dir(nh.claudeFile), forkID+".jsonl")
	if err := os.WriteFile(forkPath, append(copied, strings.ReplaceAll(fresh, fixtureClaudeID, forkID)...), 0o600); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(10 * time.Second)
	var res GetConversationResult
	for {
		res = call[GetConversationResult](t, a, MethodConversationsGet, ConversationParams{ConversationID: conv})
		if len(res.Messages) >= n0+2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(res.Messages) != n0+2 || lastMessage(res.Messages).Content+lastMessage(res.Messages).Segments[0].Content != "answer in the fork" {
		t.Fatalf("conversation after the fork: %d messages (want %d), last %+v", len(res.Messages), n0+2, lastMessage(res.Messages))
	}
	if ref := res.Conversation.Native; ref == nil || ref.SessionID != forkID || ref.Path != forkPath {
		t.Fatalf("link after the fork = %+v, want session %s at %s", res.Conversation.Native, forkID, forkPath)
	}
	list := call[SessionsListResult](t, a, MethodSessionsList, nil)
	if f := findEntry(list.Sessions, SessionKindNative, forkID); f == nil || f.ForkedFrom != fixtureClaudeID || f.ConversationID != conv {
		t.Fatalf("fork entry = %+v, want forkedFrom %s, conversation %s", f, fixtureClaudeID, conv)
	}
}
