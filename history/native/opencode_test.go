package native

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// makeOpenCodeDB writes a synthetic OpenCode 1.2+ database (schema from
// session.sql.ts, reduced to the columns the reader uses) in WAL mode.
func makeOpenCodeDB(t *testing.T, path, ws string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		`CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL, time_created INTEGER, time_updated INTEGER)`,
		`CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT, slug TEXT, directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL)`,
		`CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL)`,
		`CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL)`,
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	exec := func(q string, args ...any) {
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(q, err)
		}
	}
	exec(`INSERT INTO project VALUES ('p1', ?, 1, 1)`, ws)
	exec(`INSERT INTO session VALUES ('ses_1', 'p1', NULL, 's', ?, 'Fix the tests', '1.18.33', 1000, 5000)`, ws)
	exec(`INSERT INTO session VALUES ('ses_kid', 'p1', 'ses_1', 'k', ?, 'explore (@general subagent)', '1.18.33', 1500, 1600)`, ws)
	exec(`INSERT INTO session VALUES ('ses_other', 'p2', NULL, 'o', '/elsewhere', 'Other', '1.18.33', 1000, 9000)`)
	msg := func(id, ses string, tc int64, data any) {
		exec(`INSERT INTO message VALUES (?, ?, ?, ?, ?)`, id, ses, tc, tc, j(data))
	}
	part := func(id, mid, ses string, data any) {
		exec(`INSERT INTO part VALUES (?, ?, ?, 0, 0, ?)`, id, mid, ses, j(data))
	}
	msg("msg_u1", "ses_1", 1000, map[string]any{"role": "user", "time": map[string]any{"created": 1000}})
	part("prt_u1a", "msg_u1", "ses_1", map[string]any{"type": "text", "text": "Fix the tests"})
	part("prt_u1b", "msg_u1", "ses_1", map[string]any{"type": "text", "text": "<system>injected</system>", "synthetic": true})
	// two assistant messages (steps) for one user message = one turn
	msg("msg_a1", "ses_1", 1100, map[string]any{"role": "assistant", "parentID": "msg_u1", "modelID": "claude-sonnet-4-6", "time": map[string]any{"created": 1100, "completed": 1200}})
	part("prt_a1a", "msg_a1", "ses_1", map[string]any{"type": "step-start"})
	part("prt_a1b", "msg_a1", "ses_1", map[string]any{"type": "reasoning", "text": "look first"})
	part("prt_a1c", "msg_a1", "ses_1", map[string]any{"type": "tool", "callID": "call_1", "tool": "edit", "state": map[string]any{"status": "completed", "input": map[string]any{"filePath": ws + "/a.go"}, "output": "ok",
		"metadata": map[string]any{"filediff": map[string]any{"file": ws + "/a.go", "before": "a\n", "after": "b\nc\n", "additions": 2, "deletions": 1}}, "time": map[string]any{"start": 1110, "end": 1150}}})
	part("prt_a1d", "msg_a1", "ses_1", map[string]any{"type": "tool", "callID": "call_2", "tool": "todowrite", "state": map[string]any{"status": "completed", "input": map[string]any{"todos": []any{map[string]any{"content": "fix", "status": "in_progress", "priority": "high"}}}}})
	part("prt_a1e", "msg_a1", "ses_1", map[string]any{"type": "tool", "callID": "call_3", "tool": "bash", "state": map[string]any{"status": "completed", "input": map[string]any{"command": "go test"}, "output": "FAIL", "metadata": map[string]any{"exit": 1}}})
	msg("msg_a2", "ses_1", 1300, map[string]any{"role": "assistant", "parentID": "msg_u1", "modelID": "claude-sonnet-4-6", "time": map[string]any{"created": 1300}})
	part("prt_a2a", "msg_a2", "ses_1", map[string]any{"type": "text", "text": "Fixed."})
	part("prt_a2b", "msg_a2", "ses_1", map[string]any{"type": "tool", "callID": "call_4", "tool": "task", "state": map[string]any{"status": "completed", "input": map[string]any{"description": "explore"}, "output": "done", "metadata": map[string]any{"sessionId": "ses_kid"}}})
	msg("msg_u2", "ses_1", 2000, map[string]any{"role": "user"})
	part("prt_u2", "msg_u2", "ses_1", map[string]any{"type": "text", "text": "Stop"})
	msg("msg_a3", "ses_1", 2100, map[string]any{"role": "assistant", "parentID": "msg_u2", "error": map[string]any{"name": "MessageAbortedError", "data": map[string]any{"message": "aborted"}}})
	part("prt_a3", "msg_a3", "ses_1", map[string]any{"type": "text", "text": "Partial"})
	exec(`INSERT INTO part VALUES ('prt_bad', 'msg_a3', 'ses_1', 0, 0, '{"type":"text","te')`)
	msg("msg_k1", "ses_kid", 1500, map[string]any{"role": "user"})
	part("prt_k1", "msg_k1", "ses_kid", map[string]any{"type": "text", "text": "explore ses_kid"})
	msg("msg_k2", "ses_kid", 1510, map[string]any{"role": "assistant", "parentID": "msg_k1"})
	part("prt_k2", "msg_k2", "ses_kid", map[string]any{"type": "text", "text": "explored"})
	return db
}

func TestOpenCodeDB(t *testing.T) {
	home := t.TempDir()
	ws := t.TempDir()
	dir := filepath.Join(home, ".local", "share", "opencode")
	writeFile(t, filepath.Join(dir, "placeholder"), nil)
	db := makeOpenCodeDB(t, filepath.Join(dir, "opencode.db"), ws)
	defer db.Close()
	// a running OpenCode holds a write transaction: WAL readers still read
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE session SET title = 'uncommitted' WHERE id = 'ses_1'`); err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()

	env := Env{Home: home}
	ss, diags := List(context.Background(), env, ws)
	var got []Session
	for _, s := range ss {
		if s.Agent == AgentOpenCode {
			got = append(got, s)
		}
	}
	if len(got) != 1 || got[0].ID != "ses_1" || got[0].Title != "Fix the tests" || got[0].MessageCount != 4 || got[0].ToolCount != 3 || got[0].Model != "claude-sonnet-4-6" {
		t.Fatalf("sessions = %+v diags = %+v", got, diags)
	}
	tr, err := Read(context.Background(), env, got[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, tr)
	eqShape(t, shape(tr), []string{
		"u:Fix the tests",
		"a:reasoning(look first) tool(edit,completed) fc(a.go,+2,-1) plan(1) tool(bash,error) content(Fixed.) tool(task,completed)",
		"u:Stop",
		"a:content(Partial)",
	})
	if tr.Messages[3].Status != "cancelled" || tr.Diagnostics.SkippedLines != 1 {
		t.Errorf("aborted turn = %+v diags %+v", tr.Messages[3], tr.Diagnostics)
	}
	if len(tr.Subagents) != 1 || tr.Subagents[0].ToolCallID != "call_4" || len(tr.Subagents[0].Messages) != 2 {
		t.Errorf("subagents = %+v", tr.Subagents)
	}
	if tr2, err := Read(context.Background(), env, "ses_1"); err != nil || tr2.ID != "ses_1" {
		t.Errorf("read by id: %v", err)
	}
	if tr.Resume[1] != "--session" || tr.Resume[2] != "ses_1" {
		t.Errorf("resume = %v", tr.Resume)
	}
}

func TestOpenCodeLegacyTree(t *testing.T) {
	tr, err := ReadOpenCodeJSON("testdata/opencode/storage_v2/session/proj_test/ses_s_stage0_large.json")
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, tr)
	eqShape(t, shape(tr), []string{
		"u:Step 1", "a:tool(bash,error) content(Command failed with exit code 1.) reasoning(Investigating failing command.)", "u:Step 2", "a:content(Ok)",
	})
	if tr.Title != "OpenCode Large" || tr.Messages[1].Status != "cancelled" || len(tr.Markers) != 2 {
		t.Errorf("meta = %+v markers %+v", tr.Session, tr.Markers)
	}
	// listed through the legacy tree when its directory is the workspace
	home := t.TempDir()
	var diags []Diagnostic
	ss := listOpenCodeLegacy("testdata/opencode/storage_v2", "/tmp/large", &diags)
	if len(ss) != 1 || ss[0].ID != "s_stage0_large" || !strings.HasSuffix(ss[0].Path, ".json") {
		t.Errorf("legacy list = %+v %v (%s)", ss, diags, home)
	}
}

// A database in rollback-journal mode with an exclusive lock held (an
// OpenCode mid-write, or an older build): the listing reports it and goes on.
func TestOpenCodeLockedDB(t *testing.T) {
	home := t.TempDir()
	ws := t.TempDir()
	dir := filepath.Join(home, ".local", "share", "opencode")
	writeFile(t, filepath.Join(dir, "placeholder"), nil)
	db := makeOpenCodeDB(t, filepath.Join(dir, "opencode.db"), ws)
	if _, err := db.Exec(`PRAGMA journal_mode=DELETE`); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)
	// a Claude session of the same workspace still lists
	enc, _ := ClaudeProjectDirName(ws)
	writeFile(t, filepath.Join(home, ".claude", "projects", enc, "c.jsonl"), claudeSessionLines("c", ws, "still here", "2026-01-01T00:00:00Z"))
	ss, diags := List(context.Background(), Env{Home: home}, ws)
	if len(ss) != 1 || ss[0].Agent != AgentClaude {
		t.Errorf("sessions = %+v", ss)
	}
	found := false
	for _, d := range diags {
		if d.Agent == AgentOpenCode && d.Level == "warning" && strings.Contains(d.Message, "locked") {
			found = true
		}
	}
	if !found {
		t.Errorf("no locked-database diagnostic: %+v", diags)
	}
}
