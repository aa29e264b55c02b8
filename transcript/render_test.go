package transcript

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRenderMarkdown(t *testing.T) {
	old, nw := "a\n", "a\nb\n"
	msgs := []Message{
		{ID: "U", Timestamp: 1764496000000, Role: RoleUser, Content: "add b", Attachments: []Attachment{{Kind: "image", Name: "s.png", Size: 10}}},
		{ID: "H", Role: RoleUser, Hidden: true, Content: "SECRET SCAFFOLD"},
		{ID: "A", Timestamp: 1764496000500, Role: RoleAssistant, Agent: "claude", Status: StatusCompleted, StopReason: "end_turn", DurationMs: 1500, Segments: []Segment{
			{Type: SegReasoning, Content: "think\nmore"},
			{Type: SegContent, Content: "Adding b."},
			{Type: SegTool, ID: "t1", Name: "Edit a.txt", Status: "completed", ProviderKind: "edit", Input: json.RawMessage(`{"path":"a.txt"}`), Output: "x```y"},
			{Type: SegFileChange, Path: "a.txt", Additions: ip(1), Deletions: ip(0), OldText: &old, NewText: &nw, Status: "applied"},
			{Type: SegPlan, Entries: []PlanEntry{{Content: "edit", Status: "completed"}, {Content: "test", Status: "in_progress"}}},
			{Type: SegWorkspace, Files: []string{"a.txt"}, Errors: []string{"b: denied"}},
		}},
		{ID: "A2", Timestamp: 1764496002000, Role: RoleAssistant, Agent: "codex", Status: StatusFailed, Error: "agent exited\nstatus 1"},
	}
	got := RenderMarkdown("Add b", msgs)
	for _, want := range []string{
		"# Add b\n",
		"## User · 2025-11-30 09:46:40 UTC\n\nadd b\n",
		"- image `s.png` (10 bytes)",
		"## claude · 2025-11-30 09:46:40 UTC · completed · 1.5s\n",
		"_1 thought · 1 tool call · 1 file +1 -0 · plan 1/2_",
		"> think\n> more\n",
		"Adding b.\n",
		"**Tool** `Edit a.txt` (edit) — completed\n",
		"```json\n{\n  \"path\": \"a.txt\"\n}\n```",
		"````\nx```y\n````",
		"**File change** `a.txt` +1 -0 (applied)\n\n```diff\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n a\n+b\n```",
		"- [x] edit\n- [ ] test _(in progress)_\n",
		"- `a.txt`\n- error: b: denied\n",
		"## codex · 2025-11-30 09:46:42 UTC · failed\n",
		"**Turn failed:** agent exited status 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "SECRET") {
		t.Error("hidden message rendered")
	}
}

func TestWriteFencedCutsLongOutput(t *testing.T) {
	var b strings.Builder
	var lines []string
	for i := range 100 {
		lines = append(lines, fmt.Sprint(i))
	}
	writeFenced(&b, "", strings.Join(lines, "\n"), 60)
	if !strings.Contains(b.String(), "\n59\n```\n_(40 more lines not shown)_") || strings.Contains(b.String(), "\n60\n") {
		t.Errorf("got %s", b.String())
	}
}

func TestRenderHandoff(t *testing.T) {
	msgs := []Message{
		{ID: "U1", Role: RoleUser, Content: "old question " + strings.Repeat("x", 500)},
		{ID: "A1", Role: RoleAssistant, Agent: "codex", Status: StatusCompleted, Segments: []Segment{{Type: SegContent, Content: "old answer " + strings.Repeat("y", 500)}}},
		{ID: "U2", Role: RoleUser, Content: "fix the parser"},
		{ID: "A2", Role: RoleAssistant, Agent: "codex", Status: StatusCompleted, Segments: []Segment{
			{Type: SegContent, Content: "Fixed it."},
			{Type: SegTool, ID: "t", Name: "Run go test", Status: "error", Error: "exit 1"},
			{Type: SegFileChange, Path: "parser.go", Additions: ip(4), Deletions: ip(2), Status: "applied"},
		}},
	}
	full := RenderHandoff(msgs, HandoffOptions{})
	for _, want := range []string{"<handoff>\n", "[user]\nfix the parser\n", "[codex]\nFixed it.\n- tool Run go test: error (exit 1)\n- changed parser.go (+4 -2) applied\n", "</handoff>\n"} {
		if !strings.Contains(full, want) {
			t.Errorf("handoff lacks %q:\n%s", want, full)
		}
	}
	if strings.Contains(full, "Cut to fit") {
		t.Errorf("nothing should be cut:\n%s", full)
	}
	small := RenderHandoff(msgs, HandoffOptions{BudgetBytes: 900})
	if len(small) > 900 {
		t.Errorf("len %d > budget", len(small))
	}
	if !strings.Contains(small, "Fixed it.") || !strings.Contains(small, "Cut to fit 900 bytes") || !strings.Contains(small, "[codex, shortened]") {
		t.Errorf("small handoff:\n%s", small)
	}
	empty := RenderHandoff([]Message{{Role: RoleAssistant, Agent: "claude", Status: StatusCompleted}}, HandoffOptions{})
	if !strings.Contains(empty, "[claude]\n(no answer)\n") {
		t.Errorf("empty answer:\n%s", empty)
	}
	if RenderHandoff(nil, HandoffOptions{}) != "" || RenderHandoff([]Message{{Role: RoleUser, Hidden: true}}, HandoffOptions{}) != "" {
		t.Error("nothing to hand off should give \"\"")
	}
}

// TestRenderHandoffBounded: for random conversations and budgets the block
// never exceeds the budget, is valid UTF-8, and says when it cut.
func TestRenderHandoffBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 400 {
		msgs := genConversation(r, 1+r.IntN(8))
		if r.IntN(3) == 0 {
			msgs[len(msgs)-1].Segments = append(msgs[len(msgs)-1].Segments, Segment{Type: SegContent, Content: strings.Repeat("é", r.IntN(3000))})
		}
		budget := 150 + r.IntN(6000)
		out := RenderHandoff(msgs, HandoffOptions{BudgetBytes: budget})
		if len(out) > budget {
			t.Fatalf("case %d: %d bytes > budget %d", i, len(out), budget)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("case %d: invalid UTF-8", i)
		}
		if out == "" {
			continue
		}
		if !strings.HasPrefix(out, "<handoff>\n") || !strings.HasSuffix(out, "</handoff>\n") {
			t.Fatalf("case %d: not a handoff block:\n%s", i, out)
		}
		whole := RenderHandoff(msgs, HandoffOptions{BudgetBytes: 1 << 30})
		if out != whole && !strings.Contains(out, "Cut to fit") {
			t.Fatalf("case %d: cut without saying so:\n%s", i, out)
		}
	}
}
