package native

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

// checkInvariants asserts the canonical transcript invariants that every
// reader must keep.
func checkInvariants(t *testing.T, tr *Transcript) {
	t.Helper()
	outputs := map[string]bool{}
	ids := map[string]bool{}
	prevAssistant := false
	for i, m := range tr.Messages {
		if m.ID == "" {
			t.Errorf("message %d has no id", i)
		}
		if ids[m.ID] {
			t.Errorf("duplicate message id %q", m.ID)
		}
		ids[m.ID] = true
		switch m.Role {
		case transcript.RoleAssistant:
			if prevAssistant {
				t.Errorf("message %d (%s): two assistant messages without a user message between them", i, m.ID)
			}
			prevAssistant = true
			for k, s := range m.Segments {
				if k > 0 && (s.Type == transcript.SegContent || s.Type == transcript.SegReasoning) && m.Segments[k-1].Type == s.Type {
					t.Errorf("message %s: adjacent %s segments not merged", m.ID, s.Type)
				}
				if s.Type == transcript.SegTool {
					if s.Output != "" {
						outputs[strings.TrimSpace(s.Output)] = true
					}
					switch transcript.ToolStatus(s.Status) {
					case transcript.ToolPending, transcript.ToolRunning, transcript.ToolCompleted, transcript.ToolError:
					default:
						t.Errorf("tool %s: bad status %q", s.ID, s.Status)
					}
				}
			}
		case transcript.RoleUser:
			if !m.Hidden {
				prevAssistant = false
			}
			if isScaffold(m.Content) && !m.Hidden {
				t.Errorf("message %s: scaffolding shown as user message: %.60q", m.ID, m.Content)
			}
		default:
			t.Errorf("message %d: bad role %q", i, m.Role)
		}
	}
	for _, m := range tr.Messages {
		if m.Role == transcript.RoleUser && m.Content != "" && outputs[strings.TrimSpace(m.Content)] {
			t.Errorf("tool result shown as user message %s: %.60q", m.ID, m.Content)
		}
	}
}

func readClaudeT(t *testing.T, path string) *Transcript {
	t.Helper()
	tr, err := ReadClaude(path)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, tr)
	return tr
}

// shape renders messages compactly: "u:text" for users, "a:[segments]".
func shape(tr *Transcript) []string {
	var out []string
	for _, m := range tr.Messages {
		if m.Role == transcript.RoleUser {
			p := "u:"
			if m.Hidden {
				p = "h:"
			}
			out = append(out, p+m.Content)
			continue
		}
		var segs []string
		for _, s := range m.Segments {
			switch s.Type {
			case transcript.SegTool:
				segs = append(segs, "tool("+s.Name+","+s.Status+")")
			case transcript.SegFileChange:
				segs = append(segs, "fc("+filepath.Base(s.Path)+",+"+itoa(s.Additions)+",-"+itoa(s.Deletions)+")")
			case transcript.SegPlan:
				segs = append(segs, "plan("+itoa(intp(len(s.Entries)))+")")
			default:
				segs = append(segs, string(s.Type)+"("+s.Content+")")
			}
		}
		out = append(out, "a:"+strings.Join(segs, " "))
	}
	return out
}

func itoa(p *int) string {
	if p == nil {
		return "nil"
	}
	return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(*p))
}

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	if neg {
		b = append([]byte{'-'}, b...)
	}
	return string(b)
}

func eqShape(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("transcript shape:\n got: %q\nwant: %q", got, want)
	}
}

func TestClaudeTranscripts(t *testing.T) {
	tests := []struct {
		file  string
		want  []string
		title string
	}{
		{"traps/split_turn.jsonl", []string{
			"u:Fix the bug in auth.rs",
			"a:reasoning(Let me look.) content(I will edit it.) tool(Edit,completed) fc(auth.rs,+2,-1) tool(Bash,error) tool(Write,completed) fc(new.txt,+2,-0) content(Done.\n\nReally done.)",
			"u:Thanks",
			"a:content(You're welcome.)",
		}, "Fix the bug in auth.rs"},
		{"traps/scaffold.jsonl", []string{
			"h:/model opus",
			"u:Describe this image",
			"a:content(It is a )",
			"u:Try again",
			"u:Again",
			"a:content(A cat.)",
		}, "Describe this image"},
		{"public/claude-code-log__dag_compact_after_rewind.jsonl", []string{
			"u:Start", "a:content(Ready)", "u:Second attempt", "a:content(Second answer)", "u:Keep going",
			"a:content(Kept going)", "u:After compaction", "a:content(Final answer)",
		}, "Start"},
		{"recorded/24cb974b-077a-4ab3-bdf4-622ee8278cca.jsonl", []string{
			"h:/model default", "u:PLAIN: say hello", "a:content(PONG from fake LLM)",
			"u:WRITE_FILE /home/dev/project/hello.txt",
			"a:content(I'll create the file.) tool(Write,completed) fc(hello.txt,+1,-0) content(Done: created /home/dev/project/hello.txt)",
			"u:SLOW: take your time", "u:PLAIN: after cancel", "a:content(PONG from fake LLM)",
			"h:/model default", "u:PLAIN: after load", "a:content(PONG from fake LLM)",
			"h:/model default", "u:PLAIN: after resume", "a:content(PONG from fake LLM)",
		}, "PLAIN: say hello"},
		// parallel tool calls: a result on a side branch of the parentUuid tree is still found
		{"traps/parallel_side_branch.jsonl", []string{
			"u:Write a.txt and b.txt",
			"a:tool(Write,completed) fc(a.txt,+1,-0) tool(Write,completed) fc(b.txt,+1,-0) content(Both written.)",
			"u:Thanks", "a:content(You're welcome.)",
		}, "Write a.txt and b.txt"},
		// the same turn still running, the side-branch result written last
		{"traps/parallel_running.jsonl", []string{
			"u:Write a.txt and b.txt",
			"a:tool(Write,completed) fc(a.txt,+1,-0) tool(Write,completed) fc(b.txt,+1,-0)",
		}, "Write a.txt and b.txt"},
		// a late answer to an old tool_use written last does not become the leaf
		{"traps/stale_branch_last.jsonl", []string{
			"u:Run the build", "a:tool(Bash,completed) content(Built.)", "u:Now deploy", "a:content(Deployed.)",
		}, "Run the build"},
		// two complete records glued on one line are both read
		{"traps/glued_records.jsonl", []string{"u:Say hi", "a:content(hi)", "u:Again", "a:content(hi again)"}, "Say hi"},
		{"traps/title_custom.jsonl", nil, "My custom title"},
		{"traps/title_ai.jsonl", nil, "AI title 2"},
		{"traps/title_summary.jsonl", nil, "A summary"},
		{"traps/title_prompt.jsonl", nil, "first prompt text"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			tr := readClaudeT(t, filepath.Join("testdata/claude", tc.file))
			if tc.want != nil {
				eqShape(t, shape(tr), tc.want)
			}
			if tr.Title != tc.title {
				t.Errorf("title = %q, want %q", tr.Title, tc.title)
			}
		})
	}
}

func TestClaudeDetails(t *testing.T) {
	tr := readClaudeT(t, "testdata/claude/traps/split_turn.jsonl")
	a := tr.Messages[1]
	if a.ID != "msg_1" || a.Agent != AgentClaude {
		t.Errorf("assistant turn id/agent = %q/%q", a.ID, a.Agent)
	}
	bash := a.Segments[4]
	if bash.Error != "exit 1" || bash.Output != "" {
		t.Errorf("failed Bash: error %q output %q", bash.Error, bash.Output)
	}
	fc := a.Segments[3]
	if fc.ToolCallID != "toolu_1" || !strings.Contains(fc.Diff, "+c") {
		t.Errorf("fileChange = %+v", fc)
	}
	if a.DurationMs != 9000 {
		t.Errorf("durationMs = %d", a.DurationMs)
	}
	if tr.MessageCount != 4 || tr.ToolCount != 3 || tr.Model != "claude-opus-4-6" || tr.Cwd != "/w/app" || tr.GitBranch != "main" {
		t.Errorf("meta = %+v", tr.Session)
	}

	sc := readClaudeT(t, "testdata/claude/traps/scaffold.jsonl")
	if sc.Messages[2].Status != transcript.StatusCancelled {
		t.Errorf("interrupted turn status = %q", sc.Messages[2].Status)
	}
	if at := sc.Messages[1].Attachments; len(at) != 1 || at[0].MimeType != "image/png" {
		t.Errorf("attachments = %+v", at)
	}
	kinds := map[string]int{}
	for _, m := range sc.Markers {
		kinds[m.Kind]++
	}
	if kinds["interrupted"] != 1 || kinds["error"] != 1 {
		t.Errorf("markers = %+v", sc.Markers)
	}

	dag := readClaudeT(t, "testdata/claude/public/claude-code-log__dag_compact_after_rewind.jsonl")
	var comp []Marker
	for _, m := range dag.Markers {
		if m.Kind == "compaction" {
			comp = append(comp, m)
		}
	}
	if len(comp) != 2 || comp[0].AfterID != "msg_b2a2" || !strings.Contains(comp[1].Text, "continued from a previous conversation") {
		t.Errorf("compaction markers = %+v", comp)
	}
}

func TestClaudeBadLines(t *testing.T) {
	tr := readClaudeT(t, "testdata/claude/traps/bad_lines.jsonl")
	eqShape(t, shape(tr), []string{"u:hello", "a:content(hi)", "u:second \ufffd prompt", "a:content(ok \ufffd)"})
	// line 5 holds two glued records: both are read, none skipped
	if tr.Diagnostics.SkippedLines != 5 {
		t.Errorf("skipped = %d, want 5: %v", tr.Diagnostics.SkippedLines, tr.Diagnostics.Problems)
	}
	if !strings.Contains(strings.Join(tr.Diagnostics.Problems, "\n"), `"brand-new-type"`) {
		t.Errorf("unknown type not reported: %v", tr.Diagnostics.Problems)
	}
	// the listing skim agrees on the conversation
	f, _ := os.Open("testdata/claude/traps/bad_lines.jsonl")
	defer f.Close()
	s, ok, err := claudeMeta(f.Name(), f, 0)
	if err != nil || !ok || s.MessageCount != 4 || s.Title != "hello" {
		t.Errorf("meta = %+v ok=%v err=%v", s, ok, err)
	}
}

func TestClaudeTodoWritePlan(t *testing.T) {
	tr := readClaudeT(t, "testdata/claude/public/claude-code-log__todowrite_examples.jsonl")
	plans := 0
	for _, m := range tr.Messages {
		for _, s := range m.Segments {
			if s.Type == transcript.SegPlan {
				plans++
				if len(s.Entries) == 0 || s.Entries[0].Content == "" || s.Entries[0].Status == "" {
					t.Errorf("plan entries = %+v", s.Entries)
				}
			}
			if s.Type == transcript.SegTool && s.Name == "TodoWrite" {
				t.Errorf("TodoWrite kept as a tool")
			}
		}
	}
	if plans == 0 {
		t.Error("no plan segment")
	}
}

func TestClaudeSubagents(t *testing.T) {
	tr := readClaudeT(t, "testdata/claude/traps/22222222-2222-4222-8222-222222222222.jsonl")
	eqShape(t, shape(tr), []string{"u:Survey the code", "a:tool(Task,completed) content(The survey is done.)"})
	// the Task subagent file, then the old-style sidechain lines kept apart
	if len(tr.Subagents) != 2 || tr.Subagents[1].AgentID != "sidechain" || len(tr.Subagents[1].Messages) != 1 {
		t.Fatalf("subagents = %+v", tr.Subagents)
	}
	sa := tr.Subagents[0]
	if sa.ToolCallID != "toolu_task" || sa.AgentID != "abc123" || sa.Description != "survey" {
		t.Errorf("subagent = %+v", sa)
	}
	eqShape(t, shape(&Transcript{Messages: sa.Messages}), []string{"u:look around", "a:content(Found 3 files.)"})

	// no toolUseId in meta, no tool_use id: linked to the Task call by order
	pub := readClaudeT(t, "testdata/claude/public/agent-sessions__stage0/subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl")
	if len(pub.Subagents) != 1 || pub.Subagents[0].ToolCallID == "" || len(pub.Subagents[0].Messages) != 2 {
		t.Errorf("public subagent = %+v", pub.Subagents)
	}
}

func TestClaudePublicFixturesNeverFail(t *testing.T) {
	files, _ := filepath.Glob("testdata/claude/public/*.jsonl")
	more, _ := filepath.Glob("testdata/claude/public/agent-sessions__stage0/*.jsonl")
	for _, f := range append(files, more...) {
		tr := readClaudeT(t, f)
		if len(tr.Messages) == 0 && !strings.Contains(f, "ccusage") {
			t.Errorf("%s: no messages", f)
		}
	}
}

func TestClaudeProjectDirName(t *testing.T) {
	tests := []struct {
		in   string
		want string
		long bool
	}{
		{"/home/dev/project", "-home-dev-project", false},
		{"/home/dev/my_app.v2", "-home-dev-my-app-v2", false},
		{"/tmp/café", "-tmp-caf-", false},
		{"/" + strings.Repeat("a", 250), "-" + strings.Repeat("a", 199), true},
	}
	for _, tc := range tests {
		got, long := ClaudeProjectDirName(tc.in)
		if got != tc.want || long != tc.long {
			t.Errorf("ClaudeProjectDirName(%q) = %q,%v want %q,%v", tc.in, got, long, tc.want, tc.long)
		}
	}
}

var _ = context.Background

// The ≈v2.0 layout kept subagent files flat beside the session, naming the
// parent in sessionId.
func TestClaudeFlatSidechainFile(t *testing.T) {
	dir := t.TempDir()
	main, _ := os.ReadFile("testdata/claude/public/agent-sessions__stage0/subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl")
	sub, _ := os.ReadFile("testdata/claude/public/agent-sessions__stage0/subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f/subagents/agent-a0ad4f44468bdf20d.jsonl")
	sub = []byte(strings.ReplaceAll(string(sub), `"sessionId":"agent-a0ad4f44468bdf20d"`, `"sessionId":"0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f"`))
	writeFile(t, filepath.Join(dir, "0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl"), main)
	writeFile(t, filepath.Join(dir, "agent-a0ad4f44468bdf20d.jsonl"), sub)
	writeFile(t, filepath.Join(dir, "agent-unrelated.jsonl"), claudeSessionLines("other", "/tmp", "x", "2026-01-01T00:00:00Z"))
	tr := readClaudeT(t, filepath.Join(dir, "0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl"))
	if len(tr.Subagents) != 1 || tr.Subagents[0].AgentID != "a0ad4f44468bdf20d" || tr.Subagents[0].ToolCallID == "" {
		t.Errorf("subagents = %+v", tr.Subagents)
	}
}
