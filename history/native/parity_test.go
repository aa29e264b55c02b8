package native

import (
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// parityFixtures returns every session file in testdata that a listing
// would show, by store: Claude and pi .jsonl files (not Claude subagent
// files), every Codex rollout, Gemini session-* files.
func parityFixtures(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		base := filepath.Base(p)
		parts := strings.Split(filepath.ToSlash(p), "/")
		switch parts[1] {
		case AgentClaude:
			if strings.HasSuffix(base, ".jsonl") && !strings.HasPrefix(base, "agent-") && !slices.Contains(parts, "subagents") {
				out[AgentClaude] = append(out[AgentClaude], p)
			}
		case AgentCodex:
			if strings.HasSuffix(base, ".jsonl") || strings.HasSuffix(base, ".jsonl.zst") {
				out[AgentCodex] = append(out[AgentCodex], p)
			}
		case AgentGemini:
			if strings.HasPrefix(base, "session-") {
				out[AgentGemini] = append(out[AgentGemini], p)
			}
		case AgentPi:
			if strings.HasSuffix(base, ".jsonl") {
				out[AgentPi] = append(out[AgentPi], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// listingMeta returns what the listing shows for one session file: the
// store's listing function run through listOne exactly as List does.
func listingMeta(t *testing.T, agent, path string) (Session, bool) {
	t.Helper()
	var meta metaFunc
	switch agent {
	case AgentClaude:
		meta = claudeMeta
	case AgentCodex:
		names := map[string]string{}
		if home := codexHomeOf(path); home != "" {
			names = codexThreadNames(Env{CodexHome: home})
		}
		meta = func(p string, r io.Reader, size int64) (Session, bool, error) { return codexMeta(p, r, size, names) }
	case AgentGemini:
		meta = geminiMeta
	case AgentPi:
		meta = piMeta
	}
	res := listOne(agent, "/ws", path, nil, meta)
	if res.diag != nil {
		t.Fatalf("%s: %s", path, res.diag)
	}
	return res.s, res.ok
}

// parityDiff lists the fields on which a listing entry and the full read
// of the same session disagree. Fields a listing cannot know are left
// out, each for a reason:
//   - Gemini Cwd: the files hold only a projectHash; the listing sets the
//     workspace it matched, Read resolves the project root from the store.
//   - Diagnostics: the listing skims lines it never decodes.
func parityDiff(agent string, s Session, ok bool, tr *Transcript) []string {
	var d []string
	check := func(name string, list, read any) {
		if list != read {
			d = append(d, name+": list "+fmtAny(list)+", read "+fmtAny(read))
		}
	}
	check("listed", ok, len(tr.Messages) > 0)
	check("id", s.ID, tr.ID)
	check("title", s.Title, tr.Title)
	check("messageCount", s.MessageCount, tr.MessageCount)
	check("toolCount", s.ToolCount, tr.ToolCount)
	check("model", s.Model, tr.Model)
	check("parentId", s.ParentID, tr.ParentID)
	check("gitBranch", s.GitBranch, tr.GitBranch)
	check("resume", strings.Join(s.Resume, " "), strings.Join(tr.Resume, " "))
	if agent != AgentGemini {
		check("cwd", s.Cwd, tr.Cwd)
	}
	check("updatedAt", fmtInt64(s.UpdatedAt), fmtInt64(tr.UpdatedAt))
	check("createdAt", fmtInt64(s.CreatedAt), fmtInt64(tr.CreatedAt))
	return d
}

func fmtAny(v any) string {
	switch x := v.(type) {
	case string:
		return `"` + x + `"`
	case int:
		return fmtInt(x)
	case bool:
		if x {
			return "true"
		}
		return "false"
	}
	return "?"
}

// TestListingMatchesRead checks, for every session fixture of every file
// store, that the listing (the fast paths in claudeMeta and codexMeta, the
// readers for Gemini and pi) shows what the full Read gives: same id,
// title, message and tool counts, model and resume command. OpenCode is
// checked in TestOpenCodeListingMatchesRead.
func TestListingMatchesRead(t *testing.T) {
	n := 0
	for agent, files := range parityFixtures(t) {
		for _, f := range files {
			t.Run(filepath.ToSlash(f), func(t *testing.T) {
				tr, err := ReadFile(context.Background(), f)
				if err != nil {
					t.Fatal(err)
				}
				checkInvariants(t, tr)
				s, ok := listingMeta(t, agent, f)
				for _, d := range parityDiff(agent, s, ok, tr) {
					t.Error(d)
				}
			})
			n++
		}
	}
	if n < 40 {
		t.Errorf("only %d fixtures found", n)
	}
}

// TestOpenCodeListingMatchesRead checks the OpenCode listing (database and
// legacy JSON tree) against ReadOpenCode / ReadOpenCodeJSON, including a
// session with no title whose first user message holds only synthetic
// text (not a visible message, so the title is the next prompt), and that
// the listing cache is keyed on the session's rows.
func TestOpenCodeListingMatchesRead(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	dbPath := filepath.Join(t.TempDir(), "opencode.db")
	db := makeOpenCodeDB(t, dbPath, ws)
	defer db.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(q, err)
		}
	}
	exec(`INSERT INTO session VALUES ('ses_2', 'p1', NULL, 's2', ?, '', '1.18.33', 3000, 3000)`, ws)
	exec(`INSERT INTO message VALUES ('msg_s1', 'ses_2', 3000, 3000, '{"role":"user"}')`)
	exec(`INSERT INTO part VALUES ('prt_s1', 'msg_s1', 'ses_2', 0, 0, '{"type":"text","text":"<ctx/>","synthetic":true}')`)
	exec(`INSERT INTO message VALUES ('msg_s2', 'ses_2', 3100, 3100, '{"role":"assistant","parentID":"msg_s1","modelID":"m1"}')`)
	exec(`INSERT INTO part VALUES ('prt_s2', 'msg_s2', 'ses_2', 0, 0, '{"type":"tool","callID":"c1","tool":"bash","state":{"status":"completed","input":{},"output":"x"}}')`)
	exec(`INSERT INTO message VALUES ('msg_s3', 'ses_2', 3200, 3200, '{"role":"user"}')`)
	exec(`INSERT INTO part VALUES ('prt_s3', 'msg_s3', 'ses_2', 0, 0, '{"type":"text","text":"Now the docs"}')`)
	exec(`INSERT INTO message VALUES ('msg_s4', 'ses_2', 3300, 3300, '{"role":"assistant","parentID":"msg_s3","modelID":"m2"}')`)
	exec(`INSERT INTO part VALUES ('prt_s4', 'msg_s4', 'ses_2', 0, 0, '{"type":"text","text":"Done."}')`)

	cache := &mapCache{}
	compare := func() {
		t.Helper()
		ss, err := listOpenCodeDB(ctx, dbPath, ws, cache)
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != 2 {
			t.Fatalf("listed %d sessions, want 2", len(ss))
		}
		for _, s := range ss {
			tr, err := ReadOpenCode(ctx, dbPath, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, tr)
			for _, d := range parityDiff(AgentOpenCode, s, true, tr) {
				t.Errorf("%s: %s", s.ID, d)
			}
			if s.UpdatedAt != tr.UpdatedAt {
				t.Errorf("%s: updatedAt list %d, read %d", s.ID, s.UpdatedAt, tr.UpdatedAt)
			}
		}
	}
	compare()
	puts := cache.puts
	compare()
	if cache.puts != puts || cache.hits < 2 {
		t.Errorf("unchanged sessions were loaded again: %d puts, %d hits", cache.puts-puts, cache.hits)
	}
	// a new turn changes the key: the listing shows it
	exec(`INSERT INTO message VALUES ('msg_s5', 'ses_2', 3400, 3400, '{"role":"user"}')`)
	exec(`INSERT INTO part VALUES ('prt_s5', 'msg_s5', 'ses_2', 0, 0, '{"type":"text","text":"And the tests"}')`)
	compare()
	if cache.puts != puts+1 {
		t.Errorf("after one session changed: %d puts, want 1", cache.puts-puts)
	}

	storage := "testdata/opencode/storage_v2"
	var diags []Diagnostic
	legacy := append(listOpenCodeLegacy(storage, "/tmp/repo", &diags), listOpenCodeLegacy(storage, "/tmp/large", &diags)...)
	if len(legacy) != 2 || len(diags) != 0 {
		t.Fatalf("legacy listing = %d sessions, diags %v", len(legacy), diags)
	}
	for _, s := range legacy {
		tr, err := ReadOpenCodeJSON(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range parityDiff(AgentOpenCode, s, true, tr) {
			t.Errorf("%s: %s", s.ID, d)
		}
	}
}

// TestClaudeRepeatedUUIDs is the reported case: lines appended again with
// uuids already in the file (resume and compaction rewrites) change
// neither the transcript nor the listing's counts.
func TestClaudeRepeatedUUIDs(t *testing.T) {
	orig := readClaudeT(t, "testdata/claude/recorded/24cb974b-077a-4ab3-bdf4-622ee8278cca.jsonl")
	rep := readClaudeT(t, "testdata/claude/traps/repeated_uuids.jsonl")
	eqShape(t, shape(rep), shape(orig))
	s, ok := listingMeta(t, AgentClaude, "testdata/claude/traps/repeated_uuids.jsonl")
	if !ok || s.MessageCount != orig.MessageCount || s.ToolCount != orig.ToolCount || rep.MessageCount != orig.MessageCount {
		t.Errorf("messageCount: listing %d, read %d, original %d (tools %d/%d)", s.MessageCount, rep.MessageCount, orig.MessageCount, s.ToolCount, orig.ToolCount)
	}
}

func fmtInt64(n int64) string { return strconv.FormatInt(n, 10) }
