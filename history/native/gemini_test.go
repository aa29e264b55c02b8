package native

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readGeminiT(t *testing.T, path string) *Transcript {
	t.Helper()
	tr, err := ReadGemini(path)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, tr)
	return tr
}

func TestGeminiDisplayContentAttachments(t *testing.T) {
	tr := readGeminiT(t, "testdata/gemini/traps/session-2026-03-01T00-03-9f000004.jsonl")
	u := tr.Messages[0]
	if len(u.Attachments) != 1 || u.Attachments[0].Path != "/w/app/src/main.go" || u.Attachments[0].Kind != "file" {
		t.Errorf("attachments = %+v", u.Attachments)
	}
	if !tr.Messages[1].Hidden || !strings.Contains(tr.Messages[1].Content, "func main()") {
		t.Errorf("expansion not kept as hidden context: %+v", tr.Messages[1])
	}
	if tr.MessageCount != 4 {
		t.Errorf("messageCount = %d, want 4 (the context is not counted)", tr.MessageCount)
	}
}

func TestGeminiTranscripts(t *testing.T) {
	tests := []struct {
		file  string
		want  []string
		title string
	}{
		{"traps/session-2026-03-01T00-00-9f000000.jsonl", []string{
			"u:Edit the file",
			"a:reasoning(Plan: replace a with b) content(Editing now.) tool(replace,completed) fc(a.txt,+2,-1) plan(2) tool(run_shell_command,error) content(Done.)",
			"h:/chat save x",
			"u:Second question", "a:content(Second answer)",
			"u:Ask a subagent", "a:content(Delegating.) tool(invoke_agent,completed)",
		}, "Edit a.txt and test"},
		{"traps/session-2026-03-01T00-01-9f000000.jsonl", []string{
			"u:kept question", "a:tool(read_file,completed) content(kept answer)",
		}, "kept question"},
		{"traps/session-2026-03-01T00-02-9f000003.json", []string{}, ""},
		// displayContent: shown and titled as typed, the @file expansion kept as hidden context
		{"traps/session-2026-03-01T00-03-9f000004.jsonl", []string{
			"u:explain @src/main.go please", "h:explain @src/main.go please\n\n--- Content from referenced files ---\n\nContent from @/w/app/src/main.go:\n\npackage main\n\nfunc main() {}\n\n\n--- End of content ---",
			"a:content(It is an empty program.)", "u:thanks", "a:content(You're welcome.)",
		}, "explain @src/main.go please"},
		{"recorded/session-2026-11-30T09-27-e1dd80ab.jsonl", []string{
			"u:PLAIN: say hello", "a:content(PONG from fake LLM)",
			"u:WRITE_FILE /home/dev/project/hello-go.txt",
			"a:tool(write_file,completed) content(Done: created /home/dev/project/hello-go.txt)",
			"u:PLAIN: after cancel", "a:content(PONG from fake LLM)",
			"u:PLAIN: after load", "a:content(PONG from fake LLM)",
		}, "PLAIN: say hello"},
		{"recorded/session-2026-11-30T09-28-e1dd80ab.jsonl", []string{}, ""},
		{"public/small.json", []string{"u:Hello", "a:reasoning(Short reasoning placeholder.) content(Hi!)"}, "Hello"},
		{"public/jsonl_v040.jsonl", []string{"u:Say hello and list files.", "a:tool(run_shell_command,completed) content(Hello! I listed the files.)"}, "Say hello and list files."},
		{"public/schema_drift.json", []string{}, "Redacted session summary"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			tr := readGeminiT(t, filepath.Join("testdata/gemini", tc.file))
			eqShape(t, shape(tr), tc.want)
			if tr.Title != tc.title {
				t.Errorf("title = %q want %q", tr.Title, tc.title)
			}
		})
	}
	half := readGeminiT(t, "testdata/gemini/traps/session-2026-03-01T00-02-9f000003.json")
	if half.Diagnostics.SkippedLines != 1 {
		t.Errorf("half-written legacy file: %+v", half.Diagnostics)
	}
	tr := readGeminiT(t, "testdata/gemini/traps/session-2026-03-01T00-00-9f000000.jsonl")
	if tr.Diagnostics.SkippedLines != 1 || tr.Model != "gemini-3-flash" || len(tr.Markers) != 1 || tr.Markers[0].Kind != "notice" {
		t.Errorf("session = %+v markers %+v", tr.Session, tr.Markers)
	}
	if fc := tr.Messages[1].Segments[3]; *fc.OldText != "a\n" || fc.ToolCallID != "replace_1" {
		t.Errorf("fileChange = %+v", fc)
	}
	// the subagent chat in chats/<sessionId>/ is attached to its invoke_agent call
	if len(tr.Subagents) != 1 || tr.Subagents[0].ToolCallID != "invoke_1" || len(tr.Subagents[0].Messages) != 2 {
		t.Errorf("subagents = %+v", tr.Subagents)
	}
}

func TestListGemini(t *testing.T) {
	home := t.TempDir()
	ws := t.TempDir()
	sum := sha256.Sum256([]byte(ws))
	hash := hex.EncodeToString(sum[:])
	trap, _ := os.ReadFile("testdata/gemini/traps/session-2026-03-01T00-00-9f000000.jsonl")
	mine := strings.ReplaceAll(string(trap), "HASH", hash)
	tmp := filepath.Join(home, ".gemini", "tmp")
	slug := geminiSlug(ws)
	// found by slug, confirmed by projectHash
	writeFile(t, filepath.Join(tmp, slug, "chats", "session-2026-03-01T00-00-9f000000.jsonl"), []byte(mine))
	// same slug with another project's hash: excluded
	writeFile(t, filepath.Join(tmp, slug+"-1", "chats", "session-2026-03-01T00-00-9f000009.jsonl"), trap)
	// found through .project_root (legacy JSON, no hash needed)
	small, _ := os.ReadFile("testdata/gemini/public/small.json")
	writeFile(t, filepath.Join(tmp, "other", ".project_root"), []byte(ws+"\n"))
	writeFile(t, filepath.Join(tmp, "other", "chats", "session-2026-01-16T18-34-3739ef95.json"), small)
	ss, _ := List(context.Background(), Env{Home: home}, ws)
	var got []string
	for _, s := range ss {
		if s.Agent == AgentGemini {
			got = append(got, s.Title)
			if s.Cwd != ws {
				t.Errorf("cwd = %q", s.Cwd)
			}
		}
	}
	if strings.Join(got, ",") != "Edit a.txt and test,Hello" {
		t.Errorf("gemini sessions = %v", got)
	}
	tr, err := Read(context.Background(), Env{Home: home}, "9f000000-0000-4000-8000-000000000001")
	if err != nil || tr.Title != "Edit a.txt and test" || tr.Resume[0] != "gemini" || tr.Cwd != "" {
		t.Errorf("read by id: %v %+v", err, tr)
	}
	// the .project_root of its folder gives a read session its cwd
	tr, err = ReadGemini(filepath.Join(tmp, "other", "chats", "session-2026-01-16T18-34-3739ef95.json"))
	if err != nil || tr.Cwd != ws+"" {
		t.Errorf("cwd from .project_root: %v %q", err, tr.Cwd)
	}
}
