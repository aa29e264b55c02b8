package native

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ochat-dev/ochat/transcript"
)

const codexTrap = "testdata/codex/traps/rollout-2026-02-01T00-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl"

func readCodexT(t *testing.T, path string) *Transcript {
	t.Helper()
	tr, err := ReadCodex(path)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, tr)
	return tr
}

func TestCodexTranscripts(t *testing.T) {
	tests := []struct {
		file  string
		want  []string
		title string
	}{
		{codexTrap, []string{
			"u:Plan and edit",
			"a:reasoning(Thinking about it) plan(2) tool(exec_command,completed) tool(exec_command,error) tool(apply_patch,completed) fc(a.js,+2,-1) fc(b.txt,+1,-0) tool(shell,completed) content(Edited.)",
			"u:After rollback",
			"a:tool(apply_patch,completed) fc(c.txt,+1,-1) tool(exec_command,pending) content(Done after rollback.)",
		}, "Plan and edit"},
		{"testdata/codex/recorded/rollout-2026-11-30T09-21-42-01a22bc2-94f0-7343-bc9a-974a49e6be4e.jsonl", []string{
			"u:PLAIN: say hello", "a:content(PONG from fake LLM)",
			"u:WRITE_FILE /home/dev/project/hello.txt",
			"a:tool(apply_patch,completed) fc(hello.txt,+1,-0) content(Done: created /home/dev/project/hello.txt)",
			"u:SLOW: take your time", "u:PLAIN: after cancel", "a:content(PONG from fake LLM)",
			"u:PLAIN: after load", "a:content(PONG from fake LLM)", "u:PLAIN: after resume", "a:content(PONG from fake LLM)",
		}, "PLAIN: say hello"},
		{"testdata/codex/public/claude-code-log__legacy-flat__rollout-44444444-4444-4444-8444-444444444444.jsonl", []string{
			"u:Open the synthetic legacy session.", "a:content(The synthetic legacy session is open.)",
		}, "Open the synthetic legacy session."},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			tr := readCodexT(t, tc.file)
			eqShape(t, shape(tr), tc.want)
			if tr.Title != tc.title {
				t.Errorf("title = %q want %q", tr.Title, tc.title)
			}
		})
	}
}

func TestCodexDetails(t *testing.T) {
	tr := readCodexT(t, codexTrap)
	// the first session_meta is the identity; later ones (parent copies) are not
	if tr.ID != "0199aaaa-0000-7000-8000-000000000001" || tr.Cwd != "/w/app" || tr.GitBranch != "feature" || tr.Model != "gpt-5-codex" {
		t.Errorf("meta = %+v", tr.Session)
	}
	// the truncated line is skipped; the glued pair on line 32 is read as two records
	if tr.Diagnostics.SkippedLines != 1 {
		t.Errorf("skipped = %d: %v", tr.Diagnostics.SkippedLines, tr.Diagnostics.Problems)
	}
	a := tr.Messages[1]
	if a.DurationMs != 8000 {
		t.Errorf("durationMs = %d", a.DurationMs)
	}
	bad := a.Segments[2]
	if bad.Output != "line one\nline two" || string(bad.Input) != `"{not json"` {
		t.Errorf("invalid-arguments call = %+v", bad)
	}
	fc := a.Segments[5]
	if fc.Path != "/w/app/src/a.js" || fc.ToolCallID != "call_patch" {
		t.Errorf("apply_patch fallback fileChange = %+v", fc)
	}
	if p := a.Segments[1]; p.Entries[1].Content != "edit" || p.Entries[1].Status != "in_progress" {
		t.Errorf("plan = %+v", p.Entries)
	}
	kinds := []string{}
	for _, m := range tr.Markers {
		kinds = append(kinds, m.Kind)
	}
	if strings.Join(kinds, ",") != "rollback,compaction" {
		t.Errorf("markers = %v", kinds)
	}
}

func writeZst(t *testing.T, dst, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := zstd.NewWriter(nil)
	writeFile(t, dst, enc.EncodeAll(data, nil))
}

func TestListCodex(t *testing.T) {
	home := t.TempDir()
	ws := t.TempDir()
	trap, _ := os.ReadFile(codexTrap)
	mine := strings.ReplaceAll(string(trap), `"/w/app"`, `"`+ws+`"`)
	day := filepath.Join(home, ".codex", "sessions", "2026", "02", "01")
	writeFile(t, filepath.Join(day, "rollout-2026-02-01T00-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl"), []byte(mine))
	// compressed form of the same thread: the plain file wins
	writeZst(t, filepath.Join(day, "rollout-2026-02-01T00-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl.zst"), codexTrap)
	// a compressed-only session of this workspace
	tmp := filepath.Join(t.TempDir(), "x.jsonl")
	writeFile(t, tmp, []byte(strings.ReplaceAll(strings.ReplaceAll(mine, "0199aaaa-0000-7000-8000-000000000001", "0199bbbb-0000-7000-8000-000000000002"), "Plan and edit", "Zipped")))
	writeZst(t, filepath.Join(day, "rollout-2026-02-01T01-00-00-0199bbbb-0000-7000-8000-000000000002.jsonl.zst"), tmp)
	// another workspace: filtered out by the head
	writeFile(t, filepath.Join(day, "rollout-2026-02-01T02-00-00-0199cccc-0000-7000-8000-000000000003.jsonl"), trap)
	// archived copy of the first thread: sessions/ wins
	writeFile(t, filepath.Join(home, ".codex", "archived_sessions", "rollout-2026-02-01T00-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl"), []byte(mine))
	// thread name from session_index.jsonl
	writeFile(t, filepath.Join(home, ".codex", "session_index.jsonl"), []byte(`{"id":"0199aaaa-0000-7000-8000-000000000001","thread_name":"old"}`+"\n"+`{"id":"0199aaaa-0000-7000-8000-000000000001","thread_name":"Named thread"}`+"\n"))

	ss, _ := List(context.Background(), Env{Home: home}, ws)
	var got []string
	for _, s := range ss {
		if s.Agent == AgentCodex {
			got = append(got, s.Title+"|"+filepath.Ext(s.Path))
		}
	}
	if strings.Join(got, ",") != "Named thread|.jsonl,Zipped|.zst" && strings.Join(got, ",") != "Zipped|.zst,Named thread|.jsonl" {
		t.Errorf("codex sessions = %v", got)
	}
	tr, err := Read(context.Background(), Env{Home: home}, "0199bbbb-0000-7000-8000-000000000002")
	if err != nil || tr.Title != "Zipped" || tr.Messages[0].Content != "Zipped" {
		t.Fatalf("read by id: %v %+v", err, tr)
	}
	if tr.Resume[1] != "resume" || tr.Resume[2] != tr.ID {
		t.Errorf("resume = %v", tr.Resume)
	}
	var _ = transcript.RoleUser
}

func TestCodexPublicFixturesNeverFail(t *testing.T) {
	files, _ := filepath.Glob("testdata/codex/public/*.jsonl")
	for _, f := range files {
		readCodexT(t, f)
	}
}

func TestCodexSubagentThread(t *testing.T) {
	tr := readCodexT(t, "testdata/codex/traps/rollout-2026-02-02T00-00-00-0199dddd-0000-7000-8000-000000000004.jsonl")
	if tr.ParentID != "0199aaaa-0000-7000-8000-000000000001" || tr.Title != "Look for TODOs" {
		t.Errorf("subagent thread = %+v", tr.Session)
	}
	if top := readCodexT(t, codexTrap); top.ParentID != "" {
		t.Errorf("top-level thread has parent %q", top.ParentID)
	}
}

// The listing skim agrees with the full reader on every Codex fixture.
func TestCodexMetaAgreesWithRead(t *testing.T) {
	files, _ := filepath.Glob("testdata/codex/*/*.jsonl")
	for _, f := range files {
		tr := readCodexT(t, f)
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		s, ok, err := codexMeta(f, fh, 0, nil)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ok != (len(tr.Messages) > 0) || s.ID != tr.ID || s.Title != tr.Title || s.MessageCount != tr.MessageCount ||
			s.ToolCount != tr.ToolCount || s.Model != tr.Model || s.Cwd != tr.Cwd || s.ParentID != tr.ParentID || s.GitBranch != tr.GitBranch {
			t.Errorf("%s:\n list %+v\n read %+v", filepath.Base(f), s, tr.Session)
		}
	}
}
