package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// TestImportRefusesNonLogs: files without one valid event create nothing;
// a native session file is opened through ochat/sessions/open instead.
func TestImportRefusesNonLogs(t *testing.T) {
	d := startDaemon(t)
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n"), 0o644)
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	for _, tt := range []struct{ file, want string }{
		{passwd, passwd + ":1: "},
		{empty, "the file is empty"},
	} {
		code, out, errs := d.run(t, "", "import", tt.file)
		if code != 1 || !strings.Contains(errs, tt.want) || !strings.Contains(errs, "nothing was imported") || out != "" {
			t.Errorf("import %s: %d %q %q", tt.file, code, out, errs)
		}
	}
	if n := conversationCount(t, d); n != 0 {
		t.Fatalf("refused imports created %d conversations", n)
	}

	code, out, errs := d.run(t, "", "import", d.claudeFile)
	if code != 0 || !strings.Contains(errs, "native claude session") || !strings.Contains(errs, "ochat/sessions/open") {
		t.Fatalf("import native: %d %q %q", code, out, errs)
	}
	id := strings.Fields(out)[0]
	if n := conversationCount(t, d); n != 1 {
		t.Fatalf("conversations after native import = %d", n)
	}

	code, out, errs = d.run(t, "", "rename", id, "new", "title")
	if code != 0 || !strings.Contains(out, `"new title"`) {
		t.Fatalf("rename: %d %q %q", code, out, errs)
	}
	code, out, _ = d.run(t, "", "conversations")
	if code != 0 || !strings.Contains(out, "new title") {
		t.Errorf("after rename:\n%s", out)
	}
	code, out, errs = d.run(t, "", "delete", id)
	if code != 0 || !strings.Contains(out, "deleted "+id) {
		t.Fatalf("delete: %d %q %q", code, out, errs)
	}
	if n := conversationCount(t, d); n != 0 {
		t.Errorf("conversations after delete = %d", n)
	}
	if code, _, errs = d.run(t, "", "delete", id); code != 1 || errs == "" {
		t.Errorf("delete again: %d %q", code, errs)
	}
	if code, _, _ = d.run(t, "", "rename", id); code != 2 {
		t.Errorf("rename without a title: %d", code)
	}
}

func conversationCount(t *testing.T, d *cliDaemon) int {
	t.Helper()
	code, out, errs := d.run(t, "", "conversations", "--json")
	if code != 0 {
		t.Fatalf("conversations: %d %s", code, errs)
	}
	var list []daemon.ConversationInfo
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return len(list)
}

func intp(n int) *int       { return &n }
func strp(s string) *string { return &s }

// TestImportJSONExportKeepsMessages: an `ochatd export --format json` file
// with file changes, attachments (their blob in no store) and hidden
// messages imports with all of it, and exports again the same but for
// ids; the count printed is of visible messages.
func TestImportJSONExportKeepsMessages(t *testing.T) {
	d := startDaemon(t)
	dir := t.TempDir()
	msgs := []transcript.Message{
		{ID: "m1", Timestamp: 1_700_000_000_000, Role: transcript.RoleUser, Content: "WRITE notes.txt line1\nline2",
			Attachments: []transcript.Attachment{{Kind: "file", Name: "a.go", Path: "a.go", MimeType: "text/x-go", Hash: strings.Repeat("0f", 32), Size: 9}}},
		{ID: "m2", Timestamp: 1_700_000_001_000, Role: transcript.RoleAssistant, Agent: "ta1", Status: transcript.StatusCompleted,
			DurationMs: 1200, StopReason: "end_turn", Segments: []transcript.Segment{
				{Type: transcript.SegTool, ID: "c1", Name: "write", Status: "completed", ProviderKind: "edit", Input: json.RawMessage(`{"path":"notes.txt"}`)},
				{Type: transcript.SegFileChange, Path: d.ws + "/notes.txt", Additions: intp(2), Deletions: intp(0), Status: "applied",
					Diff: "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,2 @@\n+line1\n+line2\n", NewText: strp("line1\nline2\n"), ToolCallID: "c1"},
				{Type: transcript.SegContent, Content: "wrote it"},
			}},
		{ID: "m3", Timestamp: 1_700_000_002_000, Role: transcript.RoleUser, Content: "/model default", Hidden: true},
	}
	body, _ := json.MarshalIndent(daemon.ExportJSON{ID: "orig", Title: "notes", Messages: msgs}, "", "  ")
	file := filepath.Join(dir, "c.json")
	os.WriteFile(file, body, 0o644)

	code, out, errs := d.run(t, "", "import", file)
	if code != 0 || strings.Contains(errs, "not carried over") || strings.Contains(errs, "event log") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	f := strings.Split(strings.TrimSpace(out), "\t")
	if len(f) != 3 || f[1] != "2 messages (1 hidden)" || f[2] != "notes" {
		t.Fatalf("import printed %q", out)
	}
	code, again, errs := d.run(t, "", "export", "--format", "json", f[0])
	if code != 0 {
		t.Fatalf("export: %d %s", code, errs)
	}
	var ej daemon.ExportJSON
	if err := json.Unmarshal([]byte(again), &ej); err != nil {
		t.Fatal(err)
	}
	if ej.ID != f[0] || len(ej.Messages) != len(msgs) {
		t.Fatalf("re-export %s with %d messages", ej.ID, len(ej.Messages))
	}
	for i := range ej.Messages {
		if ej.Messages[i].ID == msgs[i].ID {
			t.Errorf("message %d kept id %s", i, msgs[i].ID)
		}
		ej.Messages[i].ID = msgs[i].ID
	}
	a, _ := json.Marshal(ej.Messages)
	b, _ := json.Marshal(msgs)
	if string(a) != string(b) {
		t.Fatalf("messages changed:\n%s\nwant\n%s", a, b)
	}

	// A bad message is refused by the daemon, naming the field.
	msgs[1].Segments[0].Type = "video"
	body, _ = json.MarshalIndent(daemon.ExportJSON{ID: "orig", Title: "bad", Messages: msgs}, "", "  ")
	os.WriteFile(file, body, 0o644)
	code, _, errs = d.run(t, "", "import", file)
	if code != 1 || !strings.Contains(errs, "messages[1].segments[0].type") || !strings.Contains(errs, "nothing was imported") {
		t.Fatalf("bad import: %d %q", code, errs)
	}
	if n := conversationCount(t, d); n != 1 {
		t.Fatalf("%d conversations", n)
	}
}

// TestValidateExports: validate names an export that is no event log in
// one line (exit 1) instead of a line per broken event.
func TestValidateExports(t *testing.T) {
	d := startDaemon(t)
	dir := t.TempDir()
	for _, format := range []string{"json", "markdown"} {
		f := filepath.Join(dir, "x."+format)
		if code, _, errs := d.run(t, "", "export", "--format", format, fixtureClaudeID, "-o", f); code != 0 {
			t.Fatalf("export %s: %d %s", format, code, errs)
		}
	}
	tests := []struct {
		name, file, body, want string
	}{
		{"json export", "x.json", "", "x.json is an `ochatd export --format json` file, not an event log"},
		{"markdown export", "x.markdown", "", "x.markdown is an `ochatd export --format markdown` file, not an event log"},
		{"cut json export", "cut.json", "{\n  \"id\": \"x\",\n  \"title\": \"t\",\n  \"mess", "cut.json is one JSON document, not an event log"},
		{"json array", "arr.json", "[{\"seq\":1}]", "arr.json is one JSON document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(dir, tt.file)
			if tt.body != "" {
				os.WriteFile(f, []byte(tt.body), 0o644)
			}
			code, out, errs := d.run(t, "", "validate", f)
			if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tt.want) || !strings.Contains(errs, "--format events") {
				t.Errorf("validate: %d %q %q", code, out, errs)
			}
			code, out, _ = d.run(t, "", "validate", "--json", f)
			var vs []transcript.Violation
			if code != 1 || json.Unmarshal([]byte(out), &vs) != nil || len(vs) != 1 || !strings.Contains(vs[0].Message, tt.want) {
				t.Errorf("validate --json: %d %q", code, out)
			}
		})
	}
	// a markdown export is refused by import in one line too
	code, _, errs := d.run(t, "", "import", filepath.Join(dir, "x.markdown"))
	if code != 1 || !strings.Contains(errs, "`ochatd export --format markdown` file") || strings.Contains(errs, ":1:") {
		t.Errorf("import markdown: %d %q", code, errs)
	}
}

// TestImportSessionWithoutID: a Codex-shaped file with no session id is
// refused, naming what is missing, and creates nothing.
func TestImportSessionWithoutID(t *testing.T) {
	d := startDaemon(t)
	f := filepath.Join(t.TempDir(), "a.jsonl")
	os.WriteFile(f, []byte(`{"timestamp":"2026-01-01T00:00:00Z","type":"turn_context","payload":{"model":"x"}}`+"\n"), 0o644)
	code, out, errs := d.run(t, "", "import", f)
	if code != 1 || out != "" || !strings.Contains(errs, "no session_meta with an id") || !strings.Contains(errs, "nothing was imported") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	if code, _, errs = d.run(t, "", "show", f); code != 1 || !strings.Contains(errs, "no session_meta with an id") {
		t.Errorf("show: %d %q", code, errs)
	}
	if n := conversationCount(t, d); n != 0 {
		t.Fatalf("%d conversations", n)
	}
}

// TestImportNativeCountsVisible: importing a native session prints the
// count of visible messages, as listings count, hidden ones (the fixture's
// /model commands) named apart.
func TestImportNativeCountsVisible(t *testing.T) {
	d := startDaemon(t)
	code, out, errs := d.run(t, "", "import", d.claudeFile)
	if code != 0 {
		t.Fatalf("import: %d %s", code, errs)
	}
	f := strings.Split(strings.TrimSpace(out), "\t")
	code, shown, errs := d.run(t, "", "show", "--json", f[0])
	if code != 0 {
		t.Fatalf("show: %d %s", code, errs)
	}
	var g daemon.GetConversationResult
	if err := json.Unmarshal([]byte(shown), &g); err != nil {
		t.Fatalf("%v\n%s", err, shown)
	}
	hidden := countHidden(g.Messages)
	want := fmt.Sprintf("%d messages (%d hidden)", len(g.Messages)-hidden, hidden)
	if hidden == 0 || len(f) != 3 || f[1] != want {
		t.Fatalf("import printed %q, want %q", out, want)
	}
}

func TestVisibleCount(t *testing.T) {
	tests := []struct {
		total, hidden int
		want          string
	}{
		{0, 0, "0 messages"},
		{14, 3, "11 messages (3 hidden)"},
		{2, 0, "2 messages"},
	}
	for _, tt := range tests {
		if got := visibleCount(tt.total, tt.hidden); got != tt.want {
			t.Errorf("visibleCount(%d, %d) = %q, want %q", tt.total, tt.hidden, got, tt.want)
		}
	}
}

func TestNotEventLog(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"event log", `{"seq":1,"type":"turn/start","turnId":"t"}` + "\n", ""},
		{"one event", `{"seq":1,"type":"turn/start","turnId":"t"}`, ""},
		{"broken log", "{\"seq\":1}\nnot json\n", ""},
		{"empty", "", ""},
		{"json export", "{\n  \"id\": \"c\",\n  \"title\": \"t\",\n  \"messages\": [\n    {\"id\": \"m\", \"role\": \"user\"}\n  ]\n}\n", "an `ochatd export --format json` file"},
		{"empty json export", "{\n  \"id\": \"c\",\n  \"title\": \"t\",\n  \"messages\": []\n}\n", "an `ochatd export --format json` file"},
		{"gemini chat", "{\n  \"sessionId\": \"s\",\n  \"messages\": [{\"type\": \"user\"}]\n}\n", "one JSON document"},
		{"cut document", "{\n  \"id\": \"c\",\n", "one JSON document"},
		{"array", `[{"seq":1}]`, "one JSON document"},
		{"markdown", "# fix the parser\n\n## User · 2026-01-01 00:00\n\nhi\n", "an `ochatd export --format markdown` file"},
		{"markdown title only", "# Conversation\n", "an `ochatd export --format markdown` file"},
		{"hash line", "#no space\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := notEventLog([]byte(tt.data)); got != tt.want {
				t.Errorf("notEventLog = %q, want %q", got, tt.want)
			}
		})
	}
}
