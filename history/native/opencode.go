package native

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ochat-dev/ochat/transcript"
	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite"
)

// OpenCode store (anomalyco/opencode session.sql.ts and message-v2.ts, v1.2+
// SQLite checked against OpenCode 1.18; legacy JSON tree ≤ 1.1;
// docs/native-stores.md §4):
//
//	$OPENCODE_DATA_DIR or $XDG_DATA_HOME/opencode or ~/.local/share/opencode
//	  opencode.db (+ -wal, -shm), opencode-<channel>.db
//	    project(id, worktree), session(id, project_id, parent_id, directory, title, time_created, time_updated)
//	    message(id, session_id, time_created, data JSON), part(id, message_id, session_id, data JSON)
//	  storage/session/<projectID>/<sessionID>.json, storage/message/<sessionID>/<msgID>.json,
//	  storage/part/<msgID>/<partID>.json, storage/project/<projectID>.json
//
// The database is opened read-only (mode=ro, never immutable: it is in WAL
// mode and being written), with a busy timeout; we never checkpoint.

func openCodeDir(env Env) string {
	switch {
	case env.OpenCodeDataDir != "":
		return env.OpenCodeDataDir
	case env.XDGDataHome != "":
		return filepath.Join(env.XDGDataHome, "opencode")
	case env.Home != "":
		return filepath.Join(env.Home, ".local", "share", "opencode")
	}
	return ""
}

// openCodeDBs lists opencode.db and the per-channel opencode-*.db files.
func openCodeDBs(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "opencode*.db"))
	sort.Strings(m)
	return m
}

// openDB opens an OpenCode database read-only.
func openDB(ctx context.Context, path string) (*sql.DB, error) {
	u := url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro&_pragma=busy_timeout(1000)&_pragma=query_only(1)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("open opencode db %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open opencode db %s: %w", path, err)
	}
	return db, nil
}

// ocSession is one OpenCode session in either store.
type ocSession struct {
	ID, ParentID, Directory, Worktree, Title string
	Created, Updated                         int64
	Source                                   string // db path, or the legacy session file
}

type ocMessage struct {
	ID      string
	Created int64
	Data    json.RawMessage
	Parts   []ocPart
}

type ocPart struct {
	ID   string
	Data json.RawMessage
}

func listOpenCode(ctx context.Context, env Env, ws string, cache Cache) ([]Session, []Diagnostic) {
	dir := openCodeDir(env)
	if dir == "" {
		return nil, nil
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, []Diagnostic{storeDiag(AgentOpenCode, dir, err)}
	}
	var out []Session
	var diags []Diagnostic
	seen := map[string]bool{}
	for _, dbPath := range openCodeDBs(dir) {
		ss, err := listOpenCodeDB(ctx, dbPath, ws, cache)
		if err != nil {
			diags = append(diags, Diagnostic{Level: "warning", Agent: AgentOpenCode, Path: dbPath, Message: err.Error()})
			continue
		}
		for _, s := range ss {
			seen[s.ID] = true
			out = append(out, s)
		}
	}
	// legacy JSON tree: rows in a database win (migration copies them)
	for _, s := range listOpenCodeLegacy(filepath.Join(dir, "storage"), ws, &diags) {
		if !seen[s.ID] {
			out = append(out, s)
		}
	}
	return out, diags
}

// listOpenCodeDB lists the top-level sessions of ws in one database. Each
// session is mapped by the same build as ReadOpenCode, so the listing's
// counts, title and model are Read's; the build is cached under a key
// that changes whenever a message or part row of the session is added,
// removed or updated (row counts and the latest time_updated of both
// tables), so an unchanged session is not loaded again.
func listOpenCodeDB(ctx context.Context, dbPath, ws string, cache Cache) ([]Session, error) {
	db, err := openDB(ctx, dbPath)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `
SELECT s.id, COALESCE(s.directory,''), COALESCE(p.worktree,''), COALESCE(s.title,''), s.time_created, s.time_updated,
  (SELECT count(*) || ':' || COALESCE(max(m.time_updated),0) FROM message m WHERE m.session_id = s.id),
  (SELECT count(*) || ':' || COALESCE(max(t.time_updated),0) FROM part t WHERE t.session_id = s.id)
FROM session s LEFT JOIN project p ON p.id = s.project_id
WHERE s.parent_id IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("list opencode sessions: %w", err)
	}
	type cand struct {
		s   ocSession
		key string
	}
	var cands []cand
	for rows.Next() {
		var c cand
		var wt, mkey, pkey string
		if err := rows.Scan(&c.s.ID, &c.s.Directory, &wt, &c.s.Title, &c.s.Created, &c.s.Updated, &mkey, &pkey); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list opencode sessions: %w", err)
		}
		if !sameDir(c.s.Directory, ws) && !sameDir(wt, ws) {
			continue
		}
		c.s.Source = dbPath
		c.key = fmt.Sprintf("native/v%d/%s/%s/%s#%s/%d/%s/%s", cacheVersion, AgentOpenCode, ws, dbPath, c.s.ID, c.s.Updated, mkey, pkey)
		cands = append(cands, c)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("list opencode sessions: %w", err)
	}
	var out []Session
	for _, c := range cands {
		if cache != nil {
			if b, ok := cache.Get(c.key); ok {
				var s Session
				if json.Unmarshal(b, &s) == nil {
					out = append(out, s)
					continue
				}
			}
		}
		msgs, err := loadOpenCodeDBMessages(ctx, db, c.s.ID)
		if err != nil {
			return out, err
		}
		s := buildOpenCode(c.s, msgs).Session
		if cache != nil {
			cache.Put(c.key, encodeSession(s))
		}
		out = append(out, s)
	}
	return out, nil
}

func listOpenCodeLegacy(storage, ws string, diags *[]Diagnostic) []Session {
	worktrees := map[string]string{}
	if ps, err := filepath.Glob(filepath.Join(storage, "project", "*.json")); err == nil {
		for _, p := range ps {
			var pj struct {
				ID       string `json:"id"`
				Worktree string `json:"worktree"`
			}
			if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &pj) == nil {
				worktrees[strings.TrimSuffix(filepath.Base(p), ".json")] = pj.Worktree
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(storage, "session", "*", "*.json"))
	var out []Session
	for _, f := range files {
		s, err := readOpenCodeLegacySession(f)
		if err != nil {
			*diags = append(*diags, Diagnostic{Level: "warning", Agent: AgentOpenCode, Path: f, Message: err.Error()})
			continue
		}
		proj := filepath.Base(filepath.Dir(f))
		if s.ParentID != "" || (!sameDir(s.Directory, ws) && !sameDir(worktrees[proj], ws)) {
			continue
		}
		t := buildOpenCode(s, loadOpenCodeLegacyMessages(storage, s.ID))
		out = append(out, t.Session)
	}
	return out
}

func readOpenCodeLegacySession(path string) (ocSession, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ocSession{}, fmt.Errorf("read opencode session: %w", err)
	}
	var j struct {
		ID        string `json:"id"`
		ParentID  string `json:"parentID"`
		Directory string `json:"directory"`
		Title     string `json:"title"`
		Time      struct {
			Created int64 `json:"created"`
			Updated int64 `json:"updated"`
		} `json:"time"`
	}
	if err := decodeLenient(b, &j); err != nil {
		return ocSession{}, fmt.Errorf("read opencode session: %w", err)
	}
	return ocSession{ID: j.ID, ParentID: j.ParentID, Directory: j.Directory, Title: j.Title, Created: j.Time.Created, Updated: j.Time.Updated, Source: path}, nil
}

// loadOpenCodeLegacyMessages reads message/<ses>/*.json and their parts
// (part/<msg>/*.json; a drifted layout keeps parts flat in part/).
func loadOpenCodeLegacyMessages(storage, sessionID string) []ocMessage {
	files, _ := filepath.Glob(filepath.Join(storage, "message", sessionID, "*.json"))
	var msgs []ocMessage
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var h struct {
			ID   string `json:"id"`
			Time struct {
				Created int64 `json:"created"`
			} `json:"time"`
		}
		if decodeLenient(b, &h) != nil {
			continue
		}
		if h.ID == "" {
			h.ID = strings.TrimSuffix(filepath.Base(f), ".json")
		}
		m := ocMessage{ID: h.ID, Created: h.Time.Created, Data: b}
		pfs, _ := filepath.Glob(filepath.Join(storage, "part", h.ID, "*.json"))
		for _, pf := range pfs {
			if pb, err := os.ReadFile(pf); err == nil && json.Valid(pb) {
				m.Parts = append(m.Parts, ocPart{ID: filepath.Base(pf), Data: pb})
			}
		}
		sort.Slice(m.Parts, func(i, j int) bool { return m.Parts[i].ID < m.Parts[j].ID }) // legacy: file name order
		msgs = append(msgs, m)
	}
	return msgs
}

// ReadOpenCodeJSON reads a legacy storage/session/<proj>/<ses>.json session.
func ReadOpenCodeJSON(path string) (*Transcript, error) {
	s, err := readOpenCodeLegacySession(path)
	if err != nil {
		return nil, err
	}
	storage := filepath.Dir(filepath.Dir(filepath.Dir(path)))
	t := buildOpenCode(s, loadOpenCodeLegacyMessages(storage, s.ID))
	return t, nil
}

// ReadOpenCode reads session id from an OpenCode database, read-only.
func ReadOpenCode(ctx context.Context, dbPath, id string) (*Transcript, error) {
	db, err := openDB(ctx, dbPath)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var s ocSession
	err = db.QueryRowContext(ctx, `SELECT s.id, COALESCE(s.parent_id,''), COALESCE(s.directory,''), COALESCE(s.title,''), s.time_created, s.time_updated
FROM session s WHERE s.id = ?`, id).Scan(&s.ID, &s.ParentID, &s.Directory, &s.Title, &s.Created, &s.Updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read opencode session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read opencode session %s: %w", id, err)
	}
	s.Source = dbPath
	msgs, err := loadOpenCodeDBMessages(ctx, db, id)
	if err != nil {
		return nil, err
	}
	t, links := buildOpenCodeLinks(s, msgs)
	// subagent (task) sessions are children rows
	rows, err := db.QueryContext(ctx, `SELECT id, COALESCE(title,'') FROM session WHERE parent_id = ? ORDER BY time_created`, id)
	if err == nil {
		var kids []ocSession
		for rows.Next() {
			var k ocSession
			if rows.Scan(&k.ID, &k.Title) == nil {
				kids = append(kids, k)
			}
		}
		rows.Close()
		for _, k := range kids {
			km, err := loadOpenCodeDBMessages(ctx, db, k.ID)
			if err != nil {
				continue
			}
			kt := buildOpenCode(k, km)
			t.Subagents = append(t.Subagents, Subagent{ToolCallID: links[k.ID], AgentID: k.ID, Description: k.Title, Path: dbPath + "#" + k.ID, Messages: kt.Messages})
		}
	}
	return t, nil
}

func loadOpenCodeDBMessages(ctx context.Context, db *sql.DB, id string) ([]ocMessage, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY time_created, id`, id)
	if err != nil {
		return nil, fmt.Errorf("read opencode messages: %w", err)
	}
	var msgs []ocMessage
	idx := map[string]int{}
	for rows.Next() {
		var m ocMessage
		var data string
		if err := rows.Scan(&m.ID, &m.Created, &data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read opencode messages: %w", err)
		}
		m.Data = json.RawMessage(data)
		idx[m.ID] = len(msgs)
		msgs = append(msgs, m)
	}
	rows.Close()
	prow, err := db.QueryContext(ctx, `SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("read opencode parts: %w", err)
	}
	defer prow.Close()
	for prow.Next() {
		var p ocPart
		var mid, data string
		if err := prow.Scan(&p.ID, &mid, &data); err != nil {
			return nil, fmt.Errorf("read opencode parts: %w", err)
		}
		p.Data = json.RawMessage(data)
		if i, ok := idx[mid]; ok {
			msgs[i].Parts = append(msgs[i].Parts, p)
		}
	}
	return msgs, prow.Err()
}

func findOpenCodeByID(ctx context.Context, env Env, id string) (*Transcript, error) {
	dir := openCodeDir(env)
	for _, db := range openCodeDBs(dir) {
		if t, err := ReadOpenCode(ctx, db, id); err == nil {
			return t, nil
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "storage", "session", "*", id+".json")); len(m) > 0 {
		return ReadOpenCodeJSON(m[0])
	}
	return nil, fmt.Errorf("read opencode session %s: %w", id, ErrNotFound)
}

type ocMessageInfo struct {
	Role     string `json:"role"`
	ParentID string `json:"parentID"`
	ModelID  string `json:"modelID"`
	Time     struct {
		Created   int64 `json:"created"`
		Completed int64 `json:"completed"`
	} `json:"time"`
	Error *struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	} `json:"error"`
}

type ocPartData struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Synthetic bool   `json:"synthetic"`
	Ignored   bool   `json:"ignored"`
	CallID    string `json:"callID"`
	Tool      string `json:"tool"`
	Mime      string `json:"mime"`
	Filename  string `json:"filename"`
	URL       string `json:"url"`
	State     struct {
		Status   string          `json:"status"`
		Input    json.RawMessage `json:"input"`
		Output   string          `json:"output"`
		Error    string          `json:"error"`
		Metadata json.RawMessage `json:"metadata"`
		Time     struct {
			Start int64 `json:"start"`
			End   int64 `json:"end"`
		} `json:"time"`
	} `json:"state"`
	Auto bool `json:"auto"`
}

// buildOpenCode maps messages (ordered by time, id) and parts (by id).
func buildOpenCode(s ocSession, msgs []ocMessage) *Transcript {
	t, _ := buildOpenCodeLinks(s, msgs)
	return t
}

// buildOpenCodeLinks is buildOpenCode that also returns child session id →
// task tool call id.
func buildOpenCodeLinks(s ocSession, msgs []ocMessage) (*Transcript, map[string]string) {
	t := &Transcript{Session: Session{ID: s.ID, Agent: AgentOpenCode, Title: s.Title, Cwd: s.Directory, CreatedAt: s.Created, UpdatedAt: s.Updated}}
	if strings.HasSuffix(s.Source, ".db") {
		t.Path = s.Source + "#" + s.ID
	} else {
		t.Path = s.Source
	}
	sort.SliceStable(msgs, func(i, j int) bool {
		if msgs[i].Created != msgs[j].Created {
			return msgs[i].Created < msgs[j].Created
		}
		return msgs[i].ID < msgs[j].ID
	})
	b := newBuilder(t, AgentOpenCode)
	for _, m := range msgs {
		var info ocMessageInfo
		if decodeLenient(m.Data, &info) != nil {
			t.Diagnostics.SkippedLines++
			t.Diagnostics.problemf("message %s: not JSON, skipped", m.ID)
			continue
		}
		ts := m.Created
		if ts == 0 {
			ts = info.Time.Created
		}
		switch info.Role {
		case "user":
			var texts []string
			var atts []transcript.Attachment
			for _, p := range m.Parts {
				var pd ocPartData
				if decodeLenient(p.Data, &pd) != nil {
					t.Diagnostics.SkippedLines++
					continue
				}
				switch pd.Type {
				case "text":
					if !pd.Synthetic && !pd.Ignored {
						texts = append(texts, pd.Text)
					}
				case "file":
					kind := "file"
					if strings.HasPrefix(pd.Mime, "image/") {
						kind = "image"
					}
					a := transcript.Attachment{Kind: kind, Name: pd.Filename, MimeType: pd.Mime}
					if strings.HasPrefix(pd.URL, "file://") {
						a.Path = strings.TrimPrefix(pd.URL, "file://")
					}
					atts = append(atts, a)
				}
			}
			text := strings.Join(texts, "\n")
			if strings.TrimSpace(text) == "" && len(atts) == 0 {
				continue
			}
			b.user(m.ID, ts, text, atts, false)
		case "assistant":
			if info.ModelID != "" {
				t.Model = info.ModelID
			}
			msg := b.assistant(m.ID, ts)
			if info.Time.Completed > 0 && info.Time.Completed > msg.Timestamp {
				msg.DurationMs = info.Time.Completed - msg.Timestamp
			}
			for _, p := range m.Parts {
				var pd ocPartData
				if decodeLenient(p.Data, &pd) != nil {
					t.Diagnostics.SkippedLines++
					continue
				}
				openCodePart(b, m.ID, ts, pd)
			}
			if e := info.Error; e != nil {
				if e.Name == "MessageAbortedError" {
					t.Messages[b.cur].Status = transcript.StatusCancelled
					b.marker("interrupted", e.Data.Message, ts)
				} else {
					t.Messages[b.cur].Status = transcript.StatusFailed
					t.Messages[b.cur].Error = e.Name + ": " + e.Data.Message
				}
			}
		}
	}
	b.finish()
	if t.Title == "" {
		for _, m := range t.Messages {
			if m.Role == transcript.RoleUser && !m.Hidden {
				t.Title = truncate(m.Content, 200)
				break
			}
		}
	}
	t.Resume = ResumeCommand(AgentOpenCode, t.ID, t.Path)
	return t, b.children
}

func openCodePart(b *builder, msgID string, ts int64, pd ocPartData) {
	switch pd.Type {
	case "reasoning":
		b.text(msgID, ts, transcript.SegReasoning, pd.Text)
	case "text":
		if !pd.Ignored {
			b.text(msgID, ts, transcript.SegContent, pd.Text)
		}
	case "compaction":
		b.marker("compaction", "Conversation compacted", ts)
	case "tool":
		st := pd.State
		if pd.Tool == "todowrite" {
			var in struct {
				Todos []struct {
					Content  string `json:"content"`
					Status   string `json:"status"`
					Priority string `json:"priority"`
				} `json:"todos"`
			}
			if json.Unmarshal(st.Input, &in) == nil && in.Todos != nil {
				entries := make([]transcript.PlanEntry, 0, len(in.Todos))
				for _, e := range in.Todos {
					entries = append(entries, transcript.PlanEntry{Content: e.Content, Status: e.Status, Priority: e.Priority})
				}
				b.plan(msgID, ts, pd.CallID, entries)
				return
			}
		}
		seg := transcript.Segment{Type: transcript.SegTool, ID: pd.CallID, Name: pd.Tool, Input: st.Input, Output: st.Output, Error: st.Error}
		switch st.Status {
		case "completed":
			seg.Status = string(transcript.ToolCompleted)
		case "error":
			seg.Status = string(transcript.ToolError)
		case "running":
			seg.Status = string(transcript.ToolRunning)
		default:
			seg.Status = string(transcript.ToolPending)
		}
		if st.Time.End > st.Time.Start && st.Time.Start > 0 {
			seg.DurationMs = st.Time.End - st.Time.Start
		}
		if seg.Status == string(transcript.ToolCompleted) {
			var md struct {
				Exit *int `json:"exit"`
			}
			if json.Unmarshal(st.Metadata, &md) == nil && md.Exit != nil && *md.Exit != 0 {
				seg.Status, seg.Error = string(transcript.ToolError), seg.Output
			}
		}
		b.tool(msgID, ts, seg)
		var md struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(st.Metadata, &md) == nil && md.SessionID != "" {
			b.children[md.SessionID] = pd.CallID
		}
		if seg.Status == string(transcript.ToolCompleted) {
			for _, fc := range openCodeFileChanges(pd) {
				fc.ToolCallID = pd.CallID
				b.fileChange(msgID, ts, fc)
			}
		}
	}
}

// openCodeFileChanges reads edit/write/apply_patch metadata.
func openCodeFileChanges(pd ocPartData) []transcript.Segment {
	var md struct {
		Filediff *struct {
			File      string  `json:"file"`
			Before    *string `json:"before"`
			After     *string `json:"after"`
			Patch     string  `json:"patch"`
			Additions int     `json:"additions"`
			Deletions int     `json:"deletions"`
		} `json:"filediff"`
		Diff     string `json:"diff"`
		Filepath string `json:"filepath"`
		Files    []struct {
			FilePath  string `json:"filePath"`
			Additions int    `json:"additions"`
			Deletions int    `json:"deletions"`
			Patch     string `json:"patch"`
		} `json:"files"`
	}
	_ = decodeLenient(pd.State.Metadata, &md)
	switch {
	case md.Filediff != nil:
		f := md.Filediff
		diff := f.Patch
		if diff == "" {
			diff = md.Diff
		}
		return []transcript.Segment{{Path: f.File, Additions: intp(f.Additions), Deletions: intp(f.Deletions), Diff: diff, OldText: f.Before, NewText: f.After}}
	case len(md.Files) > 0:
		var out []transcript.Segment
		for _, f := range md.Files {
			out = append(out, transcript.Segment{Path: f.FilePath, Additions: intp(f.Additions), Deletions: intp(f.Deletions), Diff: f.Patch})
		}
		return out
	case pd.Tool == "write":
		var in struct {
			FilePath string `json:"filePath"`
			Content  string `json:"content"`
		}
		_ = json.Unmarshal(pd.State.Input, &in)
		p := in.FilePath
		if p == "" {
			p = md.Filepath
		}
		if p != "" {
			return []transcript.Segment{{Path: p, Additions: intp(countLines(in.Content)), Deletions: intp(0), NewText: strp(in.Content)}}
		}
	}
	return nil
}
