package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/transcript"
)

func ptr[T any](v T) *T { return &v }

// richMessages is a conversation with everything the json export carries
// and the event log does not: a file change with its texts and status,
// attachments (one whose blob no store holds), hidden scaffolding, a plan,
// a workspace segment, a failed and a cancelled turn.
func richMessages() []transcript.Message {
	hash := strings.Repeat("ab", 32)
	return []transcript.Message{
		{ID: "u1", Timestamp: 1_700_000_000_000, Role: transcript.RoleUser, Content: "WRITE notes.txt line1\nline2",
			Attachments: []transcript.Attachment{
				{Kind: "file", Name: "a.go", Path: "a.go", MimeType: "text/x-go", Hash: hash, Size: 12},
				{Kind: "image", Name: "shot.png", MimeType: "image/png", Size: 3},
			}},
		{ID: "a1", Timestamp: 1_700_000_001_000, Role: transcript.RoleAssistant, Agent: "ta1", Status: transcript.StatusCompleted,
			DurationMs: 1500, StopReason: "end_turn", Segments: []transcript.Segment{
				{Type: transcript.SegReasoning, Content: "thinking"},
				{Type: transcript.SegTool, ID: "call-1", Name: "write", Status: string(transcript.ToolCompleted), ProviderKind: "edit",
					Input: json.RawMessage(`{"path":"notes.txt"}`), Output: "ok", DurationMs: 20},
				{Type: transcript.SegFileChange, Path: "/w/notes.txt", Additions: ptr(2), Deletions: ptr(0), Status: "applied",
					Diff: "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,2 @@\n+line1\n+line2\n", NewText: ptr("line1\nline2\n"), ToolCallID: "call-1"},
				{Type: transcript.SegFileChange, Path: "/w/old.txt", Status: "reverted", OldText: ptr("a\n"), NewText: ptr("b\n")},
				{Type: transcript.SegPlan, Entries: []transcript.PlanEntry{{Content: "write", Status: "completed", Priority: "high"}}},
				{Type: transcript.SegWorkspace, Files: []string{"notes.txt"}, Errors: []string{"x: gone"}},
				{Type: transcript.SegContent, Content: "done"},
			}},
		{ID: "u2", Timestamp: 1_700_000_002_000, Role: transcript.RoleUser, Content: "/model default", Hidden: true},
		{ID: "a2", Timestamp: 1_700_000_003_000, Role: transcript.RoleAssistant, Agent: "ta2", Status: transcript.StatusFailed, Error: "agent exited"},
		{ID: "u3", Timestamp: 1_700_000_004_000, Role: transcript.RoleUser, Content: "again"},
		{ID: "a3", Timestamp: 1_700_000_005_000, Role: transcript.RoleAssistant, Agent: "ta1", Status: transcript.StatusCancelled, StopReason: "cancelled",
			Segments: []transcript.Segment{{Type: transcript.SegContent, Content: "partial"}}},
	}
}

// withoutIDs is msgs with message ids cleared, for comparing an import
// with its source.
func withoutIDs(msgs []transcript.Message) []transcript.Message {
	out := make([]transcript.Message, len(msgs))
	for i, m := range msgs {
		m.ID = ""
		out[i] = m
	}
	return out
}

// canon is msgs without their ids as compact JSON (tool inputs are raw
// JSON, which the indented export re-indents).
func canon(t *testing.T, msgs []transcript.Message) string {
	t.Helper()
	b, err := json.Marshal(withoutIDs(msgs))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestImportMessagesRoundTrip: export json → import (messages) →
// conversations/get gives the original messages but for their ids, for a
// conversation with everything the event log cannot carry and for a native
// Claude session; a second round gives the same again.
func TestImportMessagesRoundTrip(t *testing.T) {
	e, _ := newSessionsEnv(t)
	c := e.dial("a")
	seed := call[ImportConversationResult](t, c, MethodImport, ImportParams{Messages: richMessages(), Title: "rich"})
	if seed.Messages != 6 || seed.Hidden != 1 || seed.Conversation.Title != "rich" || !reflect.DeepEqual(seed.Conversation.Agents, []string{"ta1", "ta2"}) {
		t.Fatalf("seed import %+v", seed)
	}
	tests := []struct {
		name string
		ref  ExportParams
	}{
		{"conversation", ExportParams{ConversationID: seed.ConversationID, Format: FormatJSON}},
		{"claude session", ExportParams{SessionID: fixtureClaudeID, Format: FormatJSON}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := call[ExportConversationResult](t, c, MethodExport, tt.ref)
			var ej ExportJSON
			if err := json.Unmarshal([]byte(x.Content), &ej); err != nil {
				t.Fatal(err)
			}
			if len(ej.Messages) == 0 {
				t.Fatal("export has no messages")
			}
			imp := call[ImportConversationResult](t, c, MethodImport, ImportParams{Messages: ej.Messages, Title: ej.Title})
			got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: imp.ConversationID})
			if imp.ConversationID == tt.ref.ConversationID || got.Conversation.Title != ej.Title || got.Conversation.Native != nil {
				t.Fatalf("import %+v", got.Conversation)
			}
			for i, m := range got.Messages {
				if m.ID == ej.Messages[i].ID {
					t.Errorf("message %d kept its id %s", i, m.ID)
				}
			}
			if a, b := canon(t, got.Messages), canon(t, ej.Messages); a != b {
				t.Fatalf("imported messages differ:\n%s\nwant\n%s", a, b)
			}
			if tt.ref.ConversationID != "" && canon(t, got.Messages) != canon(t, richMessages()) {
				t.Fatal("the seeded messages changed on the way")
			}
			if len(imp.Skipped) != 0 || len(imp.Repaired) != 0 {
				t.Fatalf("skipped %v repaired %v", imp.Skipped, imp.Repaired)
			}
		})
	}
}

// TestImportMessagesStreaming: an assistant message exported mid-turn is
// interrupted once imported (no turn runs it); one with no status stays so.
func TestImportMessagesStreaming(t *testing.T) {
	e, _ := newSessionsEnv(t)
	c := e.dial("a")
	msgs := []transcript.Message{
		{ID: "u", Timestamp: 5, Role: transcript.RoleUser, Content: "hi"},
		{ID: "a", Timestamp: 6, Role: transcript.RoleAssistant, Status: transcript.StatusStreaming},
		{ID: "b", Timestamp: 7, Role: transcript.RoleAssistant},
	}
	imp := call[ImportConversationResult](t, c, MethodImport, ImportParams{Messages: msgs})
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: imp.ConversationID})
	if imp.Conversation.Title != "Imported conversation" || len(got.Messages) != 3 ||
		got.Messages[1].Status != transcript.StatusInterrupted || got.Messages[2].Status != "" {
		t.Fatalf("import %+v messages %+v", imp.Conversation, got.Messages)
	}
}

func TestImportParamsValidate(t *testing.T) {
	user := transcript.Message{Role: transcript.RoleUser, Content: "x"}
	asst := func(segs ...transcript.Segment) transcript.Message {
		return transcript.Message{Role: transcript.RoleAssistant, Segments: segs}
	}
	withAtt := func(a transcript.Attachment) transcript.Message {
		m := user
		m.Attachments = []transcript.Attachment{a}
		return m
	}
	tests := []struct {
		name string
		p    ImportParams
		want string // "" = valid
	}{
		{"rich", ImportParams{Messages: richMessages()}, ""},
		{"empty messages", ImportParams{Messages: []transcript.Message{}}, ""},
		{"events", ImportParams{Events: mustJSON("{}\n")}, ""},
		{"neither", ImportParams{}, "events is required"},
		{"both", ImportParams{Events: mustJSON("{}"), Messages: []transcript.Message{user}}, "not both"},
		{"bad role", ImportParams{Messages: []transcript.Message{{Role: "system"}}}, `messages[0].role must be "user" or "assistant"`},
		{"bad status", ImportParams{Messages: []transcript.Message{user, {Role: transcript.RoleAssistant, Status: "done"}}}, "messages[1].status"},
		{"negative time", ImportParams{Messages: []transcript.Message{{Role: transcript.RoleUser, Timestamp: -1}}}, "messages[0].timestamp"},
		{"user segments", ImportParams{Messages: []transcript.Message{{Role: transcript.RoleUser, Segments: []transcript.Segment{{Type: transcript.SegContent}}}}}, "messages[0].segments belong to assistant"},
		{"segment type", ImportParams{Messages: []transcript.Message{asst(transcript.Segment{Type: "image"})}}, `messages[0].segments[0].type is not a segment type: "image"`},
		{"fileChange no path", ImportParams{Messages: []transcript.Message{asst(transcript.Segment{Type: transcript.SegFileChange})}}, "segments[0].path is required"},
		{"fileChange status", ImportParams{Messages: []transcript.Message{asst(transcript.Segment{Type: transcript.SegFileChange, Path: "/a", Status: "done"})}}, "segments[0].status"},
		{"segment duration", ImportParams{Messages: []transcript.Message{asst(transcript.Segment{Type: transcript.SegTool, DurationMs: -2})}}, "durationMs must not be negative"},
		{"attachment kind", ImportParams{Messages: []transcript.Message{withAtt(transcript.Attachment{Kind: "video"})}}, "attachments[0].kind"},
		{"attachment hash", ImportParams{Messages: []transcript.Message{withAtt(transcript.Attachment{Kind: "file", Hash: "../x"})}}, "attachments[0].hash must be a sha256"},
		{"attachment size", ImportParams{Messages: []transcript.Message{withAtt(transcript.Attachment{Kind: "file", Size: -1})}}, "attachments[0].size"},
		{"too many attachments", ImportParams{Messages: []transcript.Message{{Role: transcript.RoleUser, Attachments: make([]transcript.Attachment, MaxAttachments+1)}}}, "attachments holds"},
		{"too much text", ImportParams{Messages: []transcript.Message{asst(transcript.Segment{Type: transcript.SegContent, Content: strings.Repeat("x", MaxImportMessageBytes+1)})}}, "messages[0] holds"},
		{"too many messages", ImportParams{Messages: make([]transcript.Message, MaxImportMessages+1)}, "at most 100000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			je, ok := err.(*jsonrpc2.Error)
			if !ok || je.Code != jsonrpc2.InvalidParams || !strings.Contains(je.Message, tt.want) {
				t.Fatalf("validate = %v; want -32602 with %q", err, tt.want)
			}
		})
	}
}

// TestOpenSessionWithoutID: a Codex-shaped file with no session id is no
// session: sessions/read and sessions/open refuse it, saying what is
// missing, and no conversation is created.
func TestOpenSessionWithoutID(t *testing.T) {
	e, _ := newSessionsEnv(t)
	c := e.dial("a")
	p := filepath.Join(e.ws, "a.jsonl")
	if err := os.WriteFile(p, []byte(`{"timestamp":"2026-01-01T00:00:00Z","type":"turn_context","payload":{"model":"x"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{MethodSessionsRead, MethodSessionsOpen, MethodExport} {
		var params any = SessionRefParams{Path: p}
		if method == MethodExport {
			params = ExportParams{Path: p}
		}
		msg := callErr(t, c, method, params, jsonrpc2.InvalidParams)
		if !strings.Contains(msg, "no session_meta with an id") {
			t.Errorf("%s: %q does not say what is missing", method, msg)
		}
	}
	list := call[ListConversationsResult](t, c, MethodConversationsList, nil)
	if len(list.Conversations) != 0 {
		t.Fatalf("conversations created: %+v", list.Conversations)
	}
}
